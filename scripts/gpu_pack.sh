#!/usr/bin/env bash
# Pack Ray 2.60 (+ the serve extras and pytest the GPU machine's image lacks) and this project's
# committed tree for a run on the GPU machine, which reaches no registry and takes at most
# 64 MiB per call. The Ray wheel alone is 79 MB, so this packs an unpacked site folder
# with xz, without the parts Serve never loads (Java jars, RLlib, source maps): ~49 MB.
#
#   scripts/gpu_pack.sh            # in the project's root; writes .gpu/ (git-ignored locally)
#   then on the GPU machine, with .gpu/ beside the tree: bash .gpu/prelude.sh && . /tmp/gpu-env.sh && cd /tmp/proj && scripts/gpu_check.sh
#
# The image has Python 3.12, torch (CUDA), aiohttp, numpy, requests, pyyaml, grpcio 1.84, …
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64
      --platform manylinux1_x86_64)
python3 -m pip download -q "${PLAT[@]}" -d "$W/all" 'ray[serve]==2.60.0' hdrhistogram pytest pytest-timeout 2>&1 | grep -v ignored || true
# Already in the GPU image (same import names): leave them out.
present=" aiohappyeyeballs aiohttp aiosignal annotated_doc anyio attrs certifi charset_normalizer click filelock frozenlist grpcio h11 idna jinja2 markupsafe msgpack multidict numpy packaging prometheus_client propcache protobuf pyyaml requests setuptools six typing_extensions urllib3 uvloop wrapt yarl "
mkdir -p "$W/need"
for f in "$W"/all/*.whl; do
  n=$(basename "$f" | sed 's/-[0-9].*//' | tr 'A-Z' 'a-z')
  [[ "$present" == *" $n "* ]] || cp "$f" "$W/need/"
done
# grpcio-reflection must match the image's grpcio 1.84 (a newer one refuses to import).
rm -f "$W"/need/grpcio_reflection-*
python3 -m pip download -q --no-deps --only-binary=:all: -d "$W/need" grpcio-reflection==1.84.0 2>&1 | grep -v ignored || true
python3 -m pip install -q --no-deps --no-compile "${PLAT[@]}" --target "$W/site" "$W"/need/*.whl 2>&1 | grep -v -i "warning\|ignored" || true
rm -rf "$W/site/ray/jars" "$W/site/ray/rllib" "$W"/site/ray/dashboard/client/build/static/js/*.map "$W/site/bin"
mkdir -p .gpu
tar -C "$W/site" -cf - . | xz -6 -T0 > .gpu/site.tar.xz
# The tree as committed, with its commit in .commit: the unpacked tree is no git checkout,
# and a benchmark's --save names that commit (benchmarks/common.py, given_commit).
git archive --format=tar -o "$W/proj.tar" HEAD
git rev-parse HEAD > "$W/.commit"
tar -C "$W" -rf "$W/proj.tar" .commit
xz -6 < "$W/proj.tar" > .gpu/proj.tar.xz
cat > .gpu/prelude.sh <<'PRE'
#!/bin/bash
# On the GPU machine: unpack Ray and the project, put `ray` on PATH. Then: cd /tmp/proj.
G=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/site /tmp/proj
tar -C /tmp/site -xJf "$G/site.tar.xz" && tar -C /tmp/proj -xJf "$G/proj.tar.xz" || exit 1
printf '#!/bin/sh\nexec python3 -c '"'"'import sys; from ray.scripts.scripts import main; sys.argv[0]="ray"; sys.exit(main())'"'"' "$@"\n' > /usr/local/bin/ray
chmod +x /usr/local/bin/ray
echo "export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1" > /tmp/gpu-env.sh
PYTHONPATH=/tmp/site python3 -c 'from ray import serve; import torch; print("ray serve ok; cuda", torch.cuda.is_available())'
PRE
chmod +x .gpu/prelude.sh
du -sh .gpu/*
echo "Carry .gpu (under 64 MiB). Command: bash .gpu/prelude.sh && . /tmp/gpu-env.sh && cd /tmp/proj && …"
