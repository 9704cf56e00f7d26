"""Bad input never crashes the console and never damages the cluster (issue 11, item 6).

Malformed and hostile input in every place the backend takes it from the user or from a
dashboard: config files to import, knob values, load requests, dashboard addresses and
tokens, and a dashboard answering garbage. Each is generated with hypothesis (bounded,
derandomized) or picked by hand, and must be refused with a ConsoleError/ValueError
whose message a user can act on (tests/bad_input.py). Config files and knob values also
go through the real apply path against the session's Ray cluster, which must be exactly
as it was afterwards. The widgets' side is tests/widgets/test_bad_input_widgets.py.
"""

from __future__ import annotations

import copy
import datetime
import http.server
import json
import math
import threading

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from backend.cluster.client import (ClusterClient, check_serve_details, normalize_url,
                                    parse_serve_status)
from backend.deploy.config_io import (APP_FIELDS, DEPLOY_FIELDS, DEPLOYMENT_FIELDS, MAX_CONFIG_BYTES,
                                      apply_config, export_application, parse_config)
from backend.cluster.diagnose import ConnectionSpec, diagnose
from backend.errors import ApiError, ConnectError, ConsoleError
from backend.tuning.knobs import check_knob_value, load_knob_metadata
from backend.load.load_model import (LoadTarget, ModelIds, check_target, parse_headers,
                                     render_body)
from tests.bad_input import TALLY, answered, bad_url, refused

SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture])

CONFIG = "config file"
IMPORT = "config import (cluster)"
KNOB = "knob value"
LOAD = "load request"
CONNECT = "dashboard address/token"
DASHBOARD = "dashboard answer"


# ================================================================ config files

BASE = {"applications": [{
    "name": "bad-input-app", "route_prefix": "/bad-input",
    "import_path": "demo_apps.batched:app",
    "runtime_env": {"env_vars": {"OMP_NUM_THREADS": "1"}},
    "deployments": [{
        "name": "BatchedGenerator", "num_replicas": 1, "max_ongoing_requests": 8,
        "user_config": {"max_batch_size": 4, "batch_wait_timeout_s": 0.01},
        "ray_actor_options": {"num_cpus": 0.1},
    }],
}]}


def ray_accepts(doc) -> bool:
    """Ray's own schema (what the dashboard checks on PUT) as the oracle."""
    from ray.serve.schema import ServeDeploySchema

    try:
        ServeDeploySchema.model_validate(doc)
        return True
    except Exception:
        return False


def test_the_base_config_is_valid():
    assert ray_accepts(BASE)
    assert parse_config(yaml.safe_dump(BASE)) == BASE
    assert parse_config(json.dumps(BASE)) == BASE


APP = ("applications", 0)
DEP = ("applications", 0, "deployments", 0)
# Fields whose value is fuzzed: (where, field). Nested Ray models (logging_config, ...)
# get only non-mapping values: their inner schemas are Ray's business.
FUZZED = [(APP, f) for f in ("name", "route_prefix", "import_path", "runtime_env", "host",
                             "port", "deployments", "args", "external_scaler_enabled")] + \
         [(DEP, f) for f in ("name", "num_replicas", "max_ongoing_requests",
                             "max_queued_requests", "user_config", "graceful_shutdown_timeout_s",
                             "graceful_shutdown_wait_loop_s", "health_check_period_s",
                             "health_check_timeout_s", "placement_group_strategy",
                             "placement_group_bundles", "max_replicas_per_node",
                             "rolling_update_percentage", "max_surge_percent")]
NESTED = [(DEP, f) for f in ("ray_actor_options", "logging_config", "autoscaling_config",
                             "backpressure_config", "request_router_config")] + \
         [(APP, "logging_config"), (APP, "autoscaling_policy")]

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                         st.floats(-1e6, 1e6, allow_nan=False), st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


def put(doc, where, field, value):
    node = doc
    for part in where:
        node = node[part]
    node[field] = value


def parse_refused(place, text, **kw):
    return refused(place, text, lambda: parse_config(text, "bad.yaml"), **kw)


@settings(max_examples=120, **SETTINGS)
@given(st.data())
def test_config_files_with_wrong_values(data):
    where, field = data.draw(st.sampled_from(FUZZED + NESTED), label="field")
    value = data.draw(json_scalars if (where, field) in NESTED else json_values,
                      label="value")
    doc = copy.deepcopy(BASE)
    put(doc, where, field, value)
    text = data.draw(st.sampled_from([yaml.safe_dump, json.dumps]), label="format")(doc)
    if ray_accepts(doc):
        try:  # not bad input (Ray takes it): accepted, or refused as stricter — no crash
            parse_config(text, "bad.yaml")
        except ConsoleError as e:
            assert str(e).startswith("bad.yaml")
        return
    message = parse_refused(CONFIG, text)
    assert message.startswith("bad.yaml, line "), message
    assert field in message or "twice" in message or "no '" in message, message


@settings(max_examples=40, **SETTINGS)
@given(level=st.sampled_from([(), APP, DEP]),
       key=st.text(min_size=1, max_size=15).filter(
           lambda k: k not in DEPLOY_FIELDS | APP_FIELDS | DEPLOYMENT_FIELDS),
       value=json_scalars)
def test_config_files_with_unknown_fields(level, key, value):
    doc = copy.deepcopy(BASE)
    put(doc, level, key, value)
    message = parse_refused(CONFIG, yaml.safe_dump(doc))
    assert "unknown" in message


@settings(max_examples=40, **SETTINGS)
@given(cut=st.floats(0, 1, exclude_max=True))
def test_truncated_config_files(cut):
    # A flow-style (JSON) file cut anywhere is never valid.
    text = json.dumps(BASE, indent=1)
    parse_refused(CONFIG, text[:int(cut * len(text))])


@settings(max_examples=30, **SETTINGS)
@given(cut=st.integers(1, 400))
def test_truncated_block_yaml_never_crashes(cut):
    # A block-style file cut at a line end can be a valid (shorter) config: then it is
    # Ray's schema that must agree. Cut elsewhere, it must be refused or be valid.
    text = yaml.safe_dump(BASE)[:cut]
    try:
        doc = parse_config(text, "bad.yaml")
    except ConsoleError as e:
        TALLY.record(CONFIG, text)
        assert str(e).startswith("bad.yaml")
        return
    assert ray_accepts(doc), text


@settings(max_examples=40, **SETTINGS)
@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_garbage_config_files(text):
    parse_refused(CONFIG, text)


YAML_NASTIES = [
    "applications: [", "applications:\n- name: a\n  import_path: 'x:y\n", "{{{{", "]",
    "applications:\n\t- name: a\n", "a: b: c\n", "- - -\n", "---\na: 1\n---\nb: 2\n",
    "applications: !!python/object/apply:os.system ['echo pwned']\n",
    "applications: !!python/name:os.system\n", "a: \x00\n", "a: \x1b[31m\n",
    "applications:\n- name: a\n  import_path: x:y\n  name: b\n",  # duplicate key
    "a: &x [1, *x]\n", "a: &x\n  b: *x\n",
    "a: &a [1,1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
    "a: " + "[" * 60 + "]" * 60, "a: " + "[" * 5000 + "]" * 5000,
    "a: " + "[" * 100_000 + "]" * 100_000,  # libyaml segfaults on this one
    "".join(f"{' ' * i}k{i}:\n" for i in range(80)) + " " * 80 + "v",
    "{1: 2, applications: []}", "applications: {a: 1}", "applications: []",
    "applications: 7", "applications:\n- just text\n", "applications:\n- [1, 2]\n",
    "applications:\n- name: a\n", "applications:\n- import_path: x:y\n",
    "applications:\n- {name: '', import_path: 'x:y'}\n",
    "applications:\n- {name: [1], import_path: 'x:y'}\n",
    "applications:\n- {name: {a: 1}, import_path: 'x:y'}\n",
    "applications:\n- {name: a, import_path: xy}\n",
    "applications:\n- {name: a, import_path: 'a:b:c'}\n",
    "applications:\n- {name: a, import_path: 'x:y', route_prefix: nope}\n",
    "applications:\n- {name: a, import_path: 'x:y', route_prefix: '/a/'}\n",
    "applications:\n- {name: a, import_path: 'x:y', route_prefix: '/{id}'}\n",
    "applications:\n- {name: a, import_path: 'x:y'}\n- {name: a, import_path: 'x:z'}\n",
    "applications:\n- {name: a, import_path: 'x:y'}\n- {name: b, import_path: 'x:z'}\n",
    "applications:\n- {name: a, import_path: 'x:y', args: {d: 2024-02-30}}\n",
    "applications:\n- {name: a, import_path: 'x:y', args: {d: 2024-01-01}}\n",
    "applications:\n- {name: a, import_path: 'x:y', args: {t: 2024-01-01 10:00:00}}\n",
    "applications:\n- {name: a, import_path: 'x:y', args: !!binary aGVsbG8=}\n",
    "applications:\n- {name: a, import_path: 'x:y', args: !!set {a, b}}\n",
    "applications:\n- {name: a, import_path: 'x:y', args: {n: .nan}}\n",
    "applications:\n- {name: a, import_path: 'x:y', args: {n: -.inf}}\n",
    "applications:\n- {name: a, import_path: 'x:y', args: {1: one}}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: {D: 1}}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: [{name: D}, {name: D}]}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: [{num_replicas: 1}]}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: [{name: D, "
    "num_replicas: 2, autoscaling_config: {min_replicas: 1}}]}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: [{name: D, "
    "autoscaling_config: {min_replicas: 4, max_replicas: 2}}]}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: [{name: D, "
    "autoscaling_config: {target_ongoing_requests: 0}}]}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: [{name: D, "
    "ray_actor_options: {num_cpus: -1}}]}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: [{name: D, "
    "max_queued_requests: 0}]}\n",
    "applications:\n- {name: a, import_path: 'x:y', deployments: [{name: D, "
    "num_replicas: 1e400}]}\n",
    "applications:\n- {name: a, import_path: 'x:y', port: 70000}\n",
    "proxy_location: Everywhere\napplications:\n- {name: a, import_path: 'x:y'}\n",
    "http_options: 8000\napplications:\n- {name: a, import_path: 'x:y'}\n",
    "target_capacity: 150\napplications:\n- {name: a, import_path: 'x:y'}\n",
    "\ufeff\ufeffapplications: []\n", "# only a comment\n", "", "   \n\n",
    b"\xff\xfe\x00a\x00p\x00p", b"applications:\n- name: \xe9t\xe9\n",
]


@pytest.mark.parametrize("text", YAML_NASTIES, ids=range(len(YAML_NASTIES)))
def test_nasty_config_files(text):
    message = parse_refused(CONFIG, text)
    assert message.startswith("bad.yaml")


def test_huge_config_files_are_refused_before_parsing():
    import time

    for text in ("applications: []\n" + "#" * MAX_CONFIG_BYTES,
                 b"a" * (MAX_CONFIG_BYTES + 1),
                 "applications:\n" + "- {name: a, import_path: 'x:y'}\n" * 200_000):
        start = time.perf_counter()
        message = parse_refused(CONFIG, text)
        assert "too large" in message and time.perf_counter() - start < 0.5


# ================================================================ the import path, live

def snapshot(client) -> dict:
    """What a bad input must not change: each application's declarative config, its
    deployments' replica ids and the cluster-wide options."""
    details = client.serve_details()
    apps = {}
    for name, app in (details.get("applications") or {}).items():
        apps[name] = (app.get("deployed_app_config"), app.get("route_prefix"), {
            dname: sorted(r["replica_id"] for r in dep.get("replicas") or [])
            for dname, dep in (app.get("deployments") or {}).items()})
    return {"apps": apps, "http_options": details.get("http_options"),
            "proxy_location": details.get("proxy_location")}


@pytest.fixture(scope="module")
def unchanged(cluster_client, batched_demo):
    """Yields the snapshot taken before; after the module's cluster tests, compares."""
    from backend.deploy.deployer import wait_for_app

    wait_for_app(cluster_client, "batched", timeout_s=120)
    before = snapshot(cluster_client)
    assert "batched" in before["apps"]

    def check():
        assert snapshot(cluster_client) == before, "a bad input changed the cluster"
        TALLY.cluster_checks += 1

    yield check
    check()


class CodeDeployedProxy:
    """The real client, with one more application on the cluster that was deployed from
    code (serve.run: no deployed_app_config). A PUT would really reach the cluster."""

    def __init__(self, client):
        self._client = client

    def serve_details(self):
        details = copy.deepcopy(self._client.serve_details())
        details.setdefault("applications", {})["from-code"] = {
            "name": "from-code", "status": "RUNNING", "route_prefix": "/from-code",
            "deployed_app_config": None, "deployments": {}, "message": ""}
        return details

    def __getattr__(self, name):
        return getattr(self._client, name)


def import_file(client, text):
    """The console's import: validate the file, then apply it (read–modify–write)."""
    return apply_config(client, parse_config(text, "bad.yaml"))


def app_file(**app) -> str:
    doc = copy.deepcopy(BASE)
    doc["applications"][0].update(app)
    return yaml.safe_dump(doc, sort_keys=False)


def test_bad_files_through_the_real_import_path(cluster_client, unchanged):
    details = cluster_client.serve_details()
    exported = export_application(details, "batched")
    batched = parse_config(exported)["applications"][0]
    deployment = batched["deployments"][0]["name"]

    def batched_with(**changes) -> str:
        doc = parse_config(exported)
        doc["applications"][0]["deployments"][0].update(changes)
        return yaml.safe_dump(doc, sort_keys=False)

    cases = [
        # the file names an application deployed from code
        (CodeDeployedProxy(cluster_client), app_file(name="from-code", route_prefix="/x"),
         "deployed from code"),
        # another application's route
        (cluster_client, app_file(name="bad-input-app", route_prefix="/batched"),
         "already served"),
        # a package the cluster does not have (Serve would stop 'batched' and fail)
        (cluster_client, app_file(name="batched", route_prefix="/batched",
                                  runtime_env={"py_modules": ["gcs://_ray_pkg_0123abcd.zip"]}),
         "not on this cluster"),
        (cluster_client, app_file(runtime_env={"py_modules": ["gcs://../../etc/passwd"]}),
         "not a package name"),
        # what only Ray's schema knows: refused by the cluster, nothing applied
        (cluster_client, app_file(logging_config={"log_level": "LOUD"}), "refused"),
        # wrong types aimed at the running demo
        (cluster_client, batched_with(num_replicas="two"), "num_replicas"),
        (cluster_client, batched_with(max_ongoing_requests=-5), "max_ongoing_requests"),
        (cluster_client, batched_with(user_config=[16, 0.01]), "user_config"),
        (cluster_client, batched_with(ray_actor_options={"num_cpus": "lots"}), "num_cpus"),
        (cluster_client, batched_with(max_batch_size=8), "unknown"),
        (cluster_client, batched_with(user_config={"max_batch_size": float("nan")}), "finite"),
        (cluster_client, exported[:exported.index("import_path")] + "import_path: [\n",
         "not valid YAML"),
        (cluster_client, exported.replace(f"name: {deployment}",
                                          f"name: {deployment}\n    name: Other"), "twice"),
        (cluster_client, exported + "\n" + "x" * MAX_CONFIG_BYTES, "too large"),
    ]
    for client, text, expected in cases:
        message = refused(IMPORT, text, lambda: import_file(client, text),
                          allowed=(ConsoleError,))
        assert expected in message, (expected, message)
    unchanged()


@settings(max_examples=25, **SETTINGS)
@given(data=st.data())
def test_generated_bad_files_leave_the_cluster_unchanged(cluster_client, unchanged, data):
    # The running demo's own config with one wrong value: the most damaging kind of
    # bad file, since applying it would replace the demo.
    exported = export_application(cluster_client.serve_details(), "batched")
    doc = parse_config(exported)
    where, field = data.draw(st.sampled_from(FUZZED + NESTED), label="field")
    value = data.draw(json_scalars if (where, field) in NESTED else json_values,
                      label="value")
    put(doc, where, field, value)
    assume(not ray_accepts(doc))  # a valid config is not bad input
    text = yaml.safe_dump(doc)
    refused(IMPORT, text, lambda: import_file(cluster_client, text), allowed=(ConsoleError,))
    unchanged()


# ================================================================ knob values

META = load_knob_metadata()
NUMERIC = sorted(p for p, m in META.items() if m.get("kind") in ("int", "float"))


@st.composite
def bad_numeric_knob(draw):
    path = draw(st.sampled_from(NUMERIC))
    meta = META[path]
    lo, hi = meta.get("minimum"), meta.get("maximum")
    options = [st.text(max_size=8), st.none(), st.booleans(), st.lists(st.integers(), max_size=2),
               st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
               st.sampled_from([math.nan, math.inf, -math.inf])]
    if lo is not None:
        options.append(st.integers(-10**12, math.ceil(lo) - 1))
        options.append(st.floats(-1e12, lo, exclude_max=True, allow_nan=False))
    if hi is not None:
        options.append(st.integers(math.floor(hi) + 1, 10**12))
        options.append(st.floats(hi, 1e12, exclude_min=True, allow_nan=False))
    if meta["kind"] == "int":
        options.append(st.floats(lo or 0, hi or 100, allow_nan=False).filter(
            lambda v: not v.is_integer()))
    if path == "max_queued_requests":
        options.append(st.just(0))
    return path, draw(st.one_of(options))


class Weird:
    def __repr__(self):
        return "<Weird>"


bad_json_knob = st.tuples(
    st.sampled_from(["user_config.max_batch_sizes", "user_config.threshold",
                     "args.max_num_models"]),
    st.one_of(st.sampled_from([math.nan, math.inf, [1, math.nan], {"a": -math.inf},
                               {1, 2}, b"bytes", Weird(), datetime.date(2024, 1, 1),
                               "x" * 70_000, list(range(20_000))])))
bad_path = st.tuples(st.text(max_size=30).filter(
    lambda p: p not in META and not p.startswith(("user_config.", "args.",
                                                  "autoscaling_config."))
    or p in ("user_config.", "args.")), st.integers(1, 4))


@settings(max_examples=150, **SETTINGS)
@given(st.one_of(bad_numeric_knob(), bad_json_knob, bad_path))
def test_bad_knob_values_are_refused(case):
    path, value = case
    message = refused(KNOB, case, lambda: check_knob_value(path, value))
    assert path.split(".")[-1][:10] in message or "no knob" in message, message


@settings(max_examples=20, **SETTINGS)
@given(case=st.one_of(bad_numeric_knob(), bad_json_knob))
def test_bad_knob_values_never_reach_the_cluster(cluster_client, unchanged, case):
    from backend.tuning.apply import apply_changes

    path, value = case
    refused(KNOB, case, lambda: apply_changes(cluster_client, "batched", "BatchedGenerator",
                                              {path: value}, timeout_s=5),
            allowed=(ConsoleError,))
    unchanged()


# ================================================================ load requests

header_name = st.text(alphabet="abcXYZ-_", min_size=1, max_size=10)


@st.composite
def bad_request(draw):
    kind = draw(st.sampled_from(["url", "method", "header name", "header value", "body",
                                 "json body", "model prefix"]))
    target = LoadTarget(url="http://127.0.0.1:8000/batched", body='{"seed": {seq}}')
    if kind == "url":
        return kind, LoadTarget(url=draw(bad_url()), body=target.body)
    if kind == "method":
        m = draw(st.sampled_from(["", "PO ST", "GET\n", "G\x00T", "ÉCRIRE", "X" * 40,
                                  "GET/1.1", "(GET)"]))
        return kind, LoadTarget(url=target.url, method=m)
    if kind == "header name":
        name = draw(header_name)
        i = draw(st.integers(0, len(name)))
        name = name[:i] + draw(st.sampled_from(" :()<>@,;\\\"/[]?={}\x00é")) + name[i:]
        return kind, LoadTarget(url=target.url, headers=((name, "v"),))
    if kind == "header value":
        value = draw(st.text(max_size=10))
        i = draw(st.integers(0, len(value)))
        value = value[:i] + draw(st.sampled_from("\r\n\x00\x07\x7f€😀")) + value[i:]
        return kind, LoadTarget(url=target.url, headers=(("X-Test", value),))
    if kind == "body":
        n = draw(st.one_of(st.integers(-10**6, -1), st.integers(100_001, 10**12),
                           st.text(alphabet="abc.-x ", min_size=1, max_size=5)))
        return kind, LoadTarget(url=target.url, body='{"features": {features:%s}}' % n)
    if kind == "json body":
        good = draw(st.sampled_from(['{"seed": {seq}}', '{"features": {features:4}}',
                                     '{"model": "{model_id}", "x": [1, 2]}']))
        cut = draw(st.integers(1, len(good) - 1))
        return kind, LoadTarget(url=target.url, body=good[:cut])
    prefix = draw(st.sampled_from(["tenant\n", "a\rb", "\x00", "€", "x\x7f"]))
    return kind, LoadTarget(url=target.url, model_ids=ModelIds(prefix=prefix))


@settings(max_examples=120, **SETTINGS)
@given(bad_request())
def test_bad_load_requests_are_refused(case):
    kind, target = case
    message = refused(LOAD, target, lambda: check_target(target), allowed=(ValueError,))
    word = {"url": "URL", "method": "method", "header name": "header", "header value":
            "header", "body": "body", "json body": "body", "model prefix": "header"}[kind]
    assert word in message, message


@settings(max_examples=40, **SETTINGS)
@given(st.text(max_size=80).filter(lambda t: any(
    line.strip() and (":" not in line or not line.partition(":")[0].strip())
    for line in t.splitlines())))
def test_bad_header_lines_are_refused(text):
    message = refused(LOAD, ("headers", text), lambda: parse_headers(text),
                      allowed=(ValueError,))
    assert "header line" in message


def test_good_load_requests_pass():
    for target in (LoadTarget(url="http://127.0.0.1:8000/batched", body='{"seed": {seq}}'),
                   LoadTarget(url="https://[::1]:8443/a?b=c", method="GET"),
                   LoadTarget(url="http://h:8000/m", body='{"x": "{model_id}"}',
                              model_ids=ModelIds(prefix="tenant-", first=0)),
                   LoadTarget(url="http://h/x", body="{features:3}",
                              headers=(("Content-Type", "text/plain"),))):
        assert check_target(target) is target
    assert render_body("{features:2}", 1).count(",") == 1


# ================================================================ addresses and tokens

@settings(max_examples=60, **SETTINGS)
@given(bad_url().filter(lambda u: "://" in u))  # "host:port" alone is fine: http:// added
def test_bad_dashboard_addresses_are_refused(url):
    refused(CONNECT, url, lambda: normalize_url(url), allowed=(ConnectError,))


@settings(max_examples=30, **SETTINGS)
@given(st.text(min_size=1, max_size=40).filter(
    lambda t: any(c.isspace() or ord(c) < 33 or ord(c) > 126 for c in t.strip())))
def test_bad_tokens_are_refused_before_sending(token):
    message = refused(CONNECT, ("token", token),
                      lambda: ClusterClient("http://127.0.0.1:1", token),
                      allowed=(ConnectError,))
    assert "token" in message


def test_bad_connection_settings():
    cases = [("http://127.0.0.1:8265", None, "/nonexistent/ca.pem", "CA bundle"),
             ("http://127.0.0.1:8265", None, "/", "CA bundle"),
             ("http://" + "a" * 64 + ".example:8265", None, True, "host name"),
             ("http://a..b:8265", None, True, "host name"),
             ("http://" + "a." * 1100 + "b", None, True, "characters long"),
             ("http://127.0.0.1:8265", "x" * 9000, True, "token"),
             ("", None, True, "Enter")]
    for url, token, verify, expected in cases:
        message = refused(CONNECT, (url, token, verify),
                          lambda: ClusterClient(url, token, verify=verify),
                          allowed=(ConnectError,))
        assert expected in message, message


@settings(max_examples=20, **SETTINGS)
@given(st.one_of(bad_url().filter(lambda u: "://" in u),
                 st.sampled_from(["", "   ", "http://[::1"])),
       st.sampled_from([None, "tok\nen", "tøken", "/nonexistent.pem"]))
def test_diagnose_reports_bad_settings_as_a_failed_step(url, extra):
    spec = ConnectionSpec(url=url, token=extra if extra and not extra.startswith("/") else None,
                          verify=extra if extra and extra.startswith("/") else True)
    steps = refused_steps(spec)
    assert steps[0].name == "Address valid"


def refused_steps(spec, **kw):
    """diagnose never raises: its last step fails with a message."""
    try:
        steps = diagnose(spec, timeout_s=2, **kw)
    except Exception as e:
        TALLY.crashes.append(f"diagnose {spec!r}: {type(e).__name__}: {e}")
        raise AssertionError(f"diagnose crashed on {spec!r}: {type(e).__name__}: {e}") from e
    assert not steps[-1].ok, steps
    answered(CONNECT, spec, steps[-1].detail)
    return steps


# ================================================================ a dashboard answering garbage

class Garbage:
    """A web server on 127.0.0.1 that answers each path with what the test sets."""

    def __init__(self):
        self.routes: dict[str, tuple[int, str, bytes]] = {}
        routes = self.routes

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server API)
                # An exact path (query included) first, else the path without its query.
                status, ctype, body = routes.get(self.path) or routes.get(
                    self.path.split("?")[0], (404, "text/html", b"<h1>no</h1>"))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_PUT = do_POST = do_GET  # noqa: N815

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, path: str, body, status: int = 200, ctype: str = "application/json"):
        if not isinstance(body, bytes):
            body = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else \
                json.dumps(body).encode()
        self.routes[path] = (status, ctype, body)


@pytest.fixture(scope="module")
def garbage():
    g = Garbage()
    g.answer("/api/version", {"ray_version": "2.60.0", "session_name": "s"})
    g.answer("/api/authentication_mode", {"authentication_mode": "disabled"})
    yield g
    g.server.shutdown()
    g.server.server_close()


SERVE = "/api/serve/applications/"
NODES = "/nodes?view=summary"
REPLICA = {"replica_id": "r1", "state": "RUNNING", "node_ip": "127.0.0.1", "pid": 42,
           "start_time_s": 1.5, "actor_id": "a1"}
DETAILS = {
    "controller_info": {"node_id": "n"}, "proxy_location": "EveryNode",
    "http_options": {"host": "127.0.0.1", "port": 8000},
    "applications": {"batched": {
        "name": "batched", "status": "RUNNING", "message": "", "route_prefix": "/batched",
        "deployed_app_config": {"name": "batched", "import_path": "x:y"},
        "deployments": {"D": {"name": "D", "status": "HEALTHY", "message": "",
                              "target_num_replicas": 1, "replicas": [REPLICA],
                              "deployment_config": {"max_ongoing_requests": 8}}}}}}
SUMMARY = {"data": {"summary": [{"ip": "127.0.0.1", "raylet": {
    "state": "ALIVE", "nodeManagerAddress": "127.0.0.1", "metricsExportPort": 1,
    "resourcesTotal": {"CPU": 2.0, "GPU": 0.0}}}]}}

# Paths of DETAILS / SUMMARY the console reads, and a strategy of values of a wrong type.
not_text = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(),
                     st.lists(st.integers(), max_size=2), st.dictionaries(
                         st.text(max_size=3), st.integers(), max_size=2))
not_mapping = st.one_of(st.integers(), st.text(max_size=5), st.booleans(),
                        st.lists(st.integers(), max_size=3))
not_list = st.one_of(st.integers(), st.text(max_size=5), st.booleans(),
                     st.dictionaries(st.text(max_size=3), st.integers(), min_size=1,
                                     max_size=2))
not_int = st.one_of(st.text(max_size=5), st.booleans(), st.floats(allow_nan=False),
                    st.lists(st.integers(), max_size=2))
A, D = ("applications", "batched"), ("applications", "batched", "deployments", "D")
DETAIL_PATHS = [
    ((), "applications", not_mapping), ((), "http_options", not_mapping),
    ((), "controller_info", not_mapping), (A, "status", not_text), (A, "message", not_text),
    (A, "route_prefix", not_text), (A, "deployments", not_mapping),
    (A, "deployed_app_config", not_mapping), (D, "status", not_text),
    (D, "replicas", not_list), (D, "recent_dead_replicas", not_list),
    (D, "target_num_replicas", not_int), (D, "deployment_config", not_mapping),
    (D + ("replicas", 0), "replica_id", not_text), (D + ("replicas", 0), "state", not_text),
    (D + ("replicas", 0), "pid", not_int), (D + ("replicas", 0), "node_ip", not_text),
    (("applications",), "batched", not_mapping), (D[:-1], "D", not_mapping),
    (D, "replicas", st.lists(not_mapping, min_size=1, max_size=2)),
]
N = ("data", "summary", 0)
SUMMARY_PATHS = [((), "data", not_mapping), (("data",), "summary", not_list),
                 (N, "raylet", not_mapping), (N + ("raylet",), "state", not_text),
                 (N + ("raylet",), "nodeManagerAddress", not_text),
                 (N + ("raylet",), "metricsExportPort", not_int),
                 (N + ("raylet",), "resourcesTotal", not_mapping),
                 (N + ("raylet", "resourcesTotal"), "GPU", st.text(min_size=1, max_size=4)),
                 (N, "ip", not_text), (("data", "summary"), 0, not_mapping)]

not_json = st.sampled_from([
    b"<!DOCTYPE html><html><body><h1>Welcome to nginx!</h1></body></html>", b"",
    b"\xff\xfe\xfa garbage", b'{"applications": {', b'{"applications": {"a": {"status": "RU',
    b"null", b"NaN", b"[1, 2", b"Internal Server Error", b'{"a": 1}{"b": 2}',
    json.dumps(DETAILS).encode()[:-3]])
json_not_mapping = st.one_of(st.integers(), st.text(max_size=10), st.booleans(), st.none(),
                             st.lists(json_scalars, max_size=3))


def mutated(base, where, key, value):
    doc = copy.deepcopy(base)
    node = doc
    for part in where:
        node = node[part]
    node[key] = value
    return doc


def client_of(garbage):
    return ClusterClient(garbage.url, timeout_s=2)


GARBAGE_ERRORS = (ConnectError, ApiError)


@settings(max_examples=80, **SETTINGS)
@given(st.data())
def test_garbage_serve_details(garbage, data):
    kind = data.draw(st.sampled_from(["mutated", "not json", "not a mapping"]))
    if kind == "mutated":
        where, key, values = data.draw(st.sampled_from(DETAIL_PATHS), label="path")
        body = json.dumps(mutated(DETAILS, where, key, data.draw(values, label="value")))
    elif kind == "not json":
        body = data.draw(not_json, label="body")
    else:
        body = json.dumps(data.draw(json_not_mapping, label="body"))
    status = data.draw(st.sampled_from([200, 200, 200, 500, 502]), label="status")
    ctype = data.draw(st.sampled_from(["application/json", "text/html"]), label="ctype")
    garbage.answer(SERVE, body, status, ctype)
    client = client_of(garbage)
    method = data.draw(st.sampled_from(["serve_details", "serve_status", "check"]))
    message = refused(DASHBOARD, (body, status, method), getattr(client, method),
                      allowed=GARBAGE_ERRORS)
    assert garbage.url in message or "HTTP" in message or "dashboard" in message.lower()


@settings(max_examples=50, **SETTINGS)
@given(st.data())
def test_garbage_node_summary(garbage, data):
    kind = data.draw(st.sampled_from(["mutated", "not json", "not a mapping"]))
    if kind == "mutated":
        where, key, values = data.draw(st.sampled_from(SUMMARY_PATHS), label="path")
        body = json.dumps(mutated(SUMMARY, where, key, data.draw(values, label="value")))
    elif kind == "not json":
        body = data.draw(not_json, label="body")
    else:
        body = json.dumps(data.draw(json_not_mapping, label="body"))
    garbage.answer(NODES, body)
    client = client_of(garbage)
    method = data.draw(st.sampled_from(["node_summary", "metrics_targets", "cluster_gpus"]))
    call = (lambda: client.cluster_gpus(wait_s=0)) if method == "cluster_gpus" \
        else getattr(client, method)
    refused(DASHBOARD, (NODES, body, method), call, allowed=GARBAGE_ERRORS)


@settings(max_examples=30, **SETTINGS)
@given(st.one_of(not_json, st.builds(json.dumps, json_not_mapping),
                 st.builds(lambda v: json.dumps({"ray_version": v}), st.one_of(
                     st.none(), st.integers(), st.lists(st.integers(), max_size=2)))),
       st.sampled_from([200, 403, 500]))
def test_garbage_version(garbage, body, status):
    garbage.answer("/api/version", body, status)
    try:
        refused(DASHBOARD, ("/api/version", body, status), client_of(garbage).check,
                allowed=GARBAGE_ERRORS)
    finally:
        garbage.answer("/api/version", {"ray_version": "2.60.0"})


def test_garbage_dashboard_in_the_connection_test(garbage):
    answers = [
        ("/api/authentication_mode", b"[1, 2]"), ("/api/authentication_mode", b"<html>"),
        ("/api/authentication_mode", {"authentication_mode": ["token"]}),
        ("/api/authentication_mode", {"authentication_mode": None}),
        ("/api/version", {"ray_version": 2.6}), ("/api/version", [1]),
        (SERVE, {"applications": [1, 2]}), (SERVE, {"applications": {"x": "y"}}),
        (SERVE, b"<html>503</html>"), (NODES, {"data": {"summary": "none"}}),
        (NODES, {"data": {"summary": [{"raylet": {"metricsExportPort": "x"}}]}}),
        (NODES, [1]),
    ]
    for path, body in answers:
        garbage.answer("/api/authentication_mode", {"authentication_mode": "disabled"})
        garbage.answer("/api/version", {"ray_version": "2.60.0"})
        garbage.answer(SERVE, DETAILS)
        garbage.answer(NODES, body if path == NODES else SUMMARY)
        garbage.answer(path, body)
        refused_steps(ConnectionSpec(garbage.url))
    garbage.answer("/api/version", {"ray_version": "2.60.0"})


def test_parse_serve_status_refuses_garbage_too():
    for details in ([1, 2], {"applications": [1, 2]}, {"applications": {"x": "y"}},
                    {"applications": {"x": {"deployments": {"d": {"replicas": [7]}}}}}):
        refused(DASHBOARD, ("parse", details), lambda: parse_serve_status(details, 0.0),
                allowed=(ApiError,))
    assert parse_serve_status(DETAILS, 0.0).application("batched") is not None
    assert check_serve_details(DETAILS) is DETAILS


@settings(max_examples=40, **SETTINGS)
@given(st.sampled_from(["/api/cluster_status", "/api/jobs/j1", "/api/jobs/j1/logs",
                        "/api/v0/actors"]),
       st.one_of(not_json, st.builds(json.dumps, json_not_mapping),
                 st.builds(lambda v: json.dumps({"data": v}), json_not_mapping)))
def test_garbage_from_the_preflight_and_actor_endpoints(garbage, path, body):
    """The pre-flight's and the replica watch's dashboard calls: garbage gives nothing or
    a ConsoleError, never an AttributeError deep in a worker."""
    garbage.answer(path.split("?")[0], body)
    client = client_of(garbage)
    call = {"/api/cluster_status": client.cluster_status,
            "/api/jobs/j1": lambda: client.job_info("j1"),
            "/api/jobs/j1/logs": lambda: client.job_logs("j1"),
            "/api/v0/actors": client.dead_serve_actors}[path]
    try:
        result = call()
    except GARBAGE_ERRORS as e:
        assert str(e)
    else:
        assert isinstance(result, (dict, list, str))
