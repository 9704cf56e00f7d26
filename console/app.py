"""`serve-console` entry point: command line, QApplication, scripted runs."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

from console.cli import openai_run

_T0 = time.time()  # for --print-first-frame (benchmarks/startup.py)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="serve-console",
        description="Monitor and tune Ray Serve applications live. With no --address, "
                    "starts a local single-node Ray cluster and connects to it.")
    p.add_argument("--address", metavar="URL",
                   help="dashboard URL of an existing cluster, e.g. http://head:8265")
    p.add_argument("--token", help="cluster auth token (default: $RAY_AUTH_TOKEN)")
    p.add_argument("--token-file", metavar="PATH", help="read the token from this file")
    p.add_argument("--prometheus", metavar="URL",
                   help="take metrics from this Prometheus (PromQL) instead of scraping "
                        "the nodes directly")
    p.add_argument("--serve-url", metavar="URL",
                   help="where to send load: the Serve HTTP proxy, when it is not where "
                        "the cluster says (load balancer, port forward)")
    p.add_argument("--ray-client", metavar="ray://HOST:PORT",
                   help="Ray Client's address on the head, for load from inside the "
                        "cluster (default: the dashboard's host at port 10001)")
    p.add_argument("--load-from-cluster", metavar="N", type=int, default=None,
                   help="send the load from N workers placed on the cluster (Ray actors, "
                        "spread over the nodes) instead of from this machine")
    p.add_argument("--load-worker-cpus", metavar="CPUS", type=float, default=1.0,
                   help="the CPU share each --load-from-cluster worker reserves (default 1)")
    p.add_argument("--ca-bundle", metavar="PATH", help="CA bundle for TLS verification")
    p.add_argument("--insecure", action="store_true",
                   help="do not verify TLS certificates (trusted networks only)")
    p.add_argument("--demo", metavar="NAME",
                   help="deploy this bundled demo on start and put load on it "
                        "(e.g. 'batched')")
    p.add_argument("--rps", type=float, default=None,
                   help="requests/s of the --demo (or --openai-load) load (default: the "
                        "demo's own)")
    openai_run.add_arguments(p)
    p.add_argument("--apply-config", metavar="FILE",
                   help="apply a Serve config YAML on start (only the applications it "
                        "names; the rest of the cluster is left as it is)")
    p.add_argument("--theme", choices=("system", "light", "dark"),
                   help="the console's colours for this run (View → Theme remembers one)")
    p.add_argument("--layout", choices=("watch", "tune", "investigate"),
                   help="arrange the window for a job: watch (the plots take the "
                        "window), tune (plots, tuning, advisor, load), investigate "
                        "(per-replica view and event log); View → Layout changes it")
    p.add_argument("--screenshot", metavar="PATH",
                   help="save an image of the main window before exiting "
                        "(at --exit-after, else 20 s after the demo runs or connects)")
    p.add_argument("--exit-after", metavar="SECONDS", type=float,
                   help="quit cleanly this many seconds after the window opens (the "
                        "imports before it take a few seconds more), stopping what it "
                        "started")
    p.add_argument("--log-events", action="store_true",
                   help="print every event-log entry to stdout as it happens "
                        "(HH:MM:SS level message)")
    p.add_argument("--record", metavar="PATH",
                   help="record this session to PATH (default: a new file in the "
                        "sessions folder; every session is recorded unless --no-record)")
    p.add_argument("--no-record", action="store_true",
                   help="do not record this session")
    p.add_argument("--open", metavar="SESSION.db", dest="open_session",
                   help="open a recorded session offline (no cluster is started or "
                        "needed); Session → Sessions… lists them all")
    p.add_argument("--no-window", action="store_true",
                   help="run without a window (scripted runs: --demo, --apply-config, "
                        "--log-events, --exit-after); Ctrl+C quits")
    p.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs of the embedded local cluster (default: all)")
    p.add_argument("--print-first-frame", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = p.parse_args(argv)
    if args.exit_after is not None and args.exit_after < 0:
        p.error("--exit-after must be >= 0")
    if args.rps is not None and args.rps <= 0:
        p.error("--rps must be > 0")
    openai_run.check_arguments(p, args)
    if args.load_from_cluster is not None and not 1 <= args.load_from_cluster <= 256:
        p.error("--load-from-cluster takes 1 to 256 workers")
    if not 0 <= args.load_worker_cpus <= 64:
        p.error("--load-worker-cpus takes 0 to 64 CPUs")
    if args.ray_client:
        from backend.cluster.addresses import ray_client_problem

        if problem := ray_client_problem(args.ray_client):
            p.error(f"--ray-client: {problem}")
    if args.record and args.no_record:
        p.error("--record and --no-record contradict each other")
    if args.no_window and (args.screenshot or args.open_session):
        p.error("--screenshot and --open show a window; leave out --no-window")
    if args.open_session and (args.address or args.demo or args.apply_config):
        p.error("--open shows a recorded session offline; it does not connect "
                "(leave out --address, --demo and --apply-config)")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["export"]:  # `serve-console export …`: files only, no Qt, no window
        from console.cli.export import main as export_main
        return export_main(argv[1:])
    if any(a == "--autotune" or a.startswith("--autotune=") for a in argv):
        # The auto-tuner without a window: progress on stderr, one JSON line on stdout.
        from console.cli.autotune import main as autotune_main
        return autotune_main(argv)
    args = parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    from PySide6.QtCore import QCoreApplication, QEvent, QTimer

    from backend.deploy.catalog import load_catalog
    from console.model.console_model import ConsoleModel
    from console.model.live_session import Session
    from console.settings import Settings

    catalog = load_catalog()
    if args.demo and args.demo not in catalog:
        print(f"serve-console: unknown demo '{args.demo}'; choose from: "
              f"{', '.join(catalog)}", file=sys.stderr)
        return 2

    if args.apply_config:
        # Validate before starting anything: a typo should not cost a cluster start.
        from backend.deploy.config_io import parse_config, read_config_file
        from backend.errors import ConsoleError
        try:
            parse_config(read_config_file(args.apply_config), args.apply_config)
        except ConsoleError as e:
            print(f"serve-console: {e}", file=sys.stderr)
            return 2

    if args.no_window:
        app = QCoreApplication.instance() or QCoreApplication(sys.argv[:1])
    else:
        from PySide6.QtWidgets import QApplication
        app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("serve-console")
    session = Session()
    model = ConsoleModel(session, catalog, Settings())
    if args.load_from_cluster is not None:
        from backend.load.load_model import ClusterLoad

        model.set_load_source(ClusterLoad(workers=args.load_from_cluster,
                                          cpus=args.load_worker_cpus), persist=False)
    model.recording.configure(path=args.record, enabled=not args.no_record)
    window = None
    if not args.no_window:
        from console.windows.main_window import MainWindow
        window = MainWindow(model, theme=args.theme)
    runner = ScriptedRun(model, args, window)
    if window is not None:
        window.show()
        if args.layout:
            window.layouts.apply(args.layout)
    if args.print_first_frame:
        QTimer.singleShot(0, lambda: print(f"first-frame {time.time() - _T0:.3f}",
                                           flush=True))
    # Ctrl+C in the terminal closes the window the normal way (and stops the cluster).
    signal.signal(signal.SIGINT, lambda *_: runner.quit())
    signal.signal(signal.SIGTERM, lambda *_: runner.quit())
    keepalive = QTimer()  # lets Python run signal handlers while Qt's loop spins
    keepalive.start(250)
    keepalive.timeout.connect(lambda: None)
    if args.log_events:
        model.event_added.connect(lambda entry: print(entry.plain(), flush=True))
    runner.start()
    code = app.exec()
    runner.report_pending()
    session.shutdown()  # stops the local cluster this console started, and only it
    if window is not None:
        # Destroy the window while the QApplication still exists: left to the
        # interpreter's teardown, the plots' scene could outlive the application and
        # crash the exit.
        window.deleteLater()
        app.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    return code or runner.exit_code


def run() -> None:
    """The `serve-console` command: main(), then leave at once.

    Every wait was cancelled and the local cluster stopped by then; a worker thread may
    still sit in a network call to a cluster that does not answer (up to its timeout),
    and the interpreter would join it before exiting. Nothing is left to lose, so exit
    without that join: quitting takes seconds whatever was in flight."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


class ScriptedRun:
    """--address/--demo/--apply-config/--screenshot/--exit-after: the scripted parts of a
    run. It drives the console's model; *window* (None with --no-window) is only shown,
    photographed and closed."""

    def __init__(self, model, args, window=None) -> None:
        self.model, self.session, self.window, self.args = model, model.session, window, args
        self.demo = model.catalog.get(args.demo) if args.demo else None
        self.exit_code = 0
        self._shot_taken = False
        self._waiting_for_demo = False  # --demo deployed, its application not yet polled
        self.viewer = None  # --open: the recorded session's window
        self.token_report = None  # OpenAI-streaming load with --log-events
        if args.exit_after is not None or args.screenshot or window is None:
            model.interactive = False  # nothing may stop at a question

    def start(self) -> None:
        from PySide6.QtCore import QTimer

        s = self.session
        s.connected.connect(self._on_connected)
        s.connect_failed.connect(self._on_connect_failed)
        self.model.deploys.finished.connect(self._on_deploy_finished)
        self.model.deploys.config_file_done.connect(self._on_config_file_done)
        if self.args.exit_after is not None:
            QTimer.singleShot(int(self.args.exit_after * 1000), self._exit_after_reached)
        if self.args.open_session:
            self._open_session(self.args.open_session)
        elif self.args.address:
            a = self.args
            s.connect_remote(a.address, a.token, token_file=a.token_file,
                             prometheus_url=a.prometheus,
                             verify=False if a.insecure else (a.ca_bundle or True),
                             serve_http_url=a.serve_url, ray_client_url=a.ray_client)
        else:
            s.connect_local(num_cpus=self.args.num_cpus)

    def quit(self) -> None:
        """End the run the normal way: the window closes (or the model, without one)."""
        if self.token_report is not None:
            self.token_report.final()
        if self.window is not None:
            self.window.close()
        else:
            from PySide6.QtCore import QCoreApplication

            self.model.close()
            QCoreApplication.quit()

    def _open_session(self, path: str) -> None:
        """--open: the recorded session in its own window; nothing connects."""
        if not os.path.exists(path):
            print(f"serve-console: there is no session file {path}", file=sys.stderr)
            self.exit_code = 2
            self.quit()
            return
        self.window.open_recorded_session(path, on_opened=self._on_session_opened)

    def _on_session_opened(self, viewer) -> None:
        if viewer is None:
            self.exit_code = 1
        self.viewer = viewer
        self._schedule_screenshot()

    def _cli_target(self):
        from widgets.connect_dialog import ConnectTarget

        a = self.args
        return ConnectTarget(local=False, url=a.address, token=a.token,
                             token_file=a.token_file, prometheus_url=a.prometheus,
                             verify_tls=not a.insecure, ca_bundle=a.ca_bundle,
                             serve_http_url=a.serve_url, ray_client_url=a.ray_client)

    def _on_connected(self, info) -> None:
        local = self.session.local_cluster
        if info.local and local is not None:
            # Scripts (and the tests) learn which processes belong to this console.
            print(f"serve-console: started local Ray cluster {info.url} "
                  f"(process group {local.pid})", flush=True)
        if self.args.apply_config:
            self.model.deploys.import_config(self.args.apply_config)
        if self.args.openai_load:
            from backend.load.load_model import LoadPlan

            self.model.start_plan(LoadPlan(openai_run.openai_target(self.args),
                                           openai_run.openai_model(self.args),
                                           self.model.load_source))
            self._report_tokens()
        if self.demo is not None:
            if why := self.model.deploy_demo(self.demo):
                print(f"serve-console: not deploying {self.demo.key}: {why}",
                      file=sys.stderr, flush=True)
                self.exit_code = 1
        elif not self.args.apply_config:
            self._schedule_screenshot()

    def _on_config_file_done(self, ok: bool, message: str) -> None:
        if not self.args.apply_config:
            return
        print(f"serve-console: {message}", file=sys.stdout if ok else sys.stderr, flush=True)
        if not ok:
            self.exit_code = 1
        if self.demo is None:
            self._schedule_screenshot()

    def _on_connect_failed(self, message: str) -> None:
        print(f"serve-console: {message}", file=sys.stderr)
        if self.args.exit_after is not None or self.args.screenshot or self.window is None:
            self.exit_code = 1
            if self.args.exit_after is None:
                self._finish()
        else:
            # The dialog shows everything the command line asked for, ready to correct.
            self.window.show_connect_dialog(
                message, self._cli_target() if self.args.address else None)

    def _on_deploy_finished(self, ok: bool, app: str, message: str) -> None:
        if self.demo is None or app != self.demo.app_name:
            return
        if ok:
            self._start_demo_load()
        else:
            self.exit_code = 1
        self._schedule_screenshot()

    def _start_demo_load(self, status=None) -> None:
        """--demo's load goes to the demo: its deployment is selected first, as the
        window's tree selects a deployed demo. The deploy can finish before the status
        poll lists the new application; then this waits for the poll that does. Started
        from nothing selected, the load would go to the first application with a route:
        on a shared cluster, a user's own application."""
        status = status or self.session.status
        app = status.application(self.demo.app_name) if status is not None else None
        if app is None or not app.deployments:
            if not self._waiting_for_demo:
                self._waiting_for_demo = True
                self.session.status_changed.connect(self._on_status_for_demo)
            return
        if self._waiting_for_demo:
            self._waiting_for_demo = False
            self.session.status_changed.disconnect(self._on_status_for_demo)
        self.model.select((app.name, app.deployments[0].name))
        # The demo's own request (backend/load/load_model.demo_target): for a catalog load
        # of kind openai, streamed completions timed per token.
        if self.model.start_load(self.args.rps or self.demo.load.default_rps) \
                and self.demo.load.kind == "openai":
            self._report_tokens()

    def _report_tokens(self) -> None:
        if self.args.log_events and self.token_report is None:
            self.token_report = openai_run.TokenReport(self.model.load)

    def _on_status_for_demo(self, status) -> None:
        self._start_demo_load(status)

    def _schedule_screenshot(self) -> None:
        from PySide6.QtCore import QTimer

        if self.args.screenshot and self.args.exit_after is None:
            QTimer.singleShot(20_000, self._finish)

    def _finish(self) -> None:
        self.take_screenshot()
        self.quit()

    def _exit_after_reached(self) -> None:
        # Said as it happens: a script (or a test) sees the run end on time, and how long
        # the exit itself then takes.
        print(f"serve-console: --exit-after {self.args.exit_after:g} s reached: exiting",
              flush=True)
        from console.model.connection import ConnectionState

        conn = self.model.connection
        if conn.state is ConnectionState.CONNECTING:
            # The run ends before it began: a script must not read that as success.
            print(f"serve-console: still connecting at exit ({conn.message.rstrip('…')})",
                  file=sys.stderr, flush=True)
            self.exit_code = self.exit_code or 1
        self._finish()

    def report_pending(self) -> None:
        """At exit: say what was still under way (a deploy waiting for room, an apply
        waiting for the cluster); a scripted run that leaves work pending failed."""
        pending = self.session.operations.pending()
        if not pending:
            return
        print("serve-console: still pending at exit: "
              + "; ".join(op.describe() for op in pending), file=sys.stderr, flush=True)
        if self.args.exit_after is not None or self.args.screenshot:
            self.exit_code = self.exit_code or 1

    def take_screenshot(self) -> None:
        if self.args.screenshot and not self._shot_taken and self.window is not None:
            self._shot_taken = True
            self.window.plots.refresh(time.time())
            # --open: the picture is of the recorded session's window.
            shown = getattr(self, "viewer", None) or self.window
            if shown.grab().save(self.args.screenshot):
                print(f"serve-console: screenshot saved to {self.args.screenshot}")
            else:
                print(f"serve-console: could not save {self.args.screenshot}",
                      file=sys.stderr)
                self.exit_code = 1


if __name__ == "__main__":
    sys.exit(main())
