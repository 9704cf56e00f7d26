"""Records samples at 10 Hz into sys.argv[1] until killed, printing each sample's time
once it has been handed to the recorder (the crash test kills it with SIGKILL)."""

import sys
import time

from backend.recording.recorder import Recorder

rec = Recorder(sys.argv[1], {"cluster_url": "http://crash:8265"})
print("ready", flush=True)
i = 0
while True:
    t = time.time()
    rec.samples(t, {("app", "dep"): {"requests_per_s": float(i), "latency_p99_ms": t % 97}})
    rec.event(t, "info", f"tick {i}")
    print(f"{t!r}", flush=True)
    i += 1
    time.sleep(0.1)
