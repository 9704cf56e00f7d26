"""A reference HTTP server with known, injected behaviour, to check the load generator.

Run it in its own process (`ReferenceServer()` starts one on a free loopback port) so it
does not share the generator's GIL. Routes (any method):

  /fast                      200 "ok" at once
  /sleep/{ms}                200 after sleeping ms milliseconds
  /stall?period_s=P&stall_s=S  every P seconds (from server start) the server "pauses" for
                             S seconds: a request arriving in a pause is answered when the
                             pause ends, others at once
  /bimodal?fast_ms=F&slow_ms=L&every=N   every N-th request sleeps L ms, the rest F ms
  /status/{code}             answers with that status
  /batched                   200 if the JSON body has "features": 256 numbers, else 400
  /model                     counts the serve_multiplexed_model_id header; 400 without one
  /model-counts              GET: {"model-1": n, …}; /reset clears the counts
  /stream?first_ms=F&chunks=N&gap_ms=G   chunked: first chunk after F ms, then N-1 more
                             every G ms
  /seen                      GET: {"count": requests seen (other than /seen), "last": the
                             wall-clock time (time.time()) the last one arrived, or null}
  /openai/{first_ms}/{every_ms}/v1/completions   POST: an OpenAI-style SSE stream of the
                             body's max_tokens tokens (default 16), the first first_ms after
                             the request arrived, then one every every_ms, each due at a
                             fixed time from the arrival; then usage and [DONE]. GET
                             /openai/…/v1/models lists the model "reference"
  /versions                  a traffic split as the router convention answers it: every
                             4th request is "v2" (20 ms, every other one of them HTTP
                             500), the rest "v1" (2 ms); x-serve-version names it
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter

from tests.support.child_server import ChildServer

MODEL_HEADER = "serve_multiplexed_model_id"


def make_app():
    from aiohttp import web

    t0 = time.monotonic()
    counts: Counter[str] = Counter()
    bimodal_n = [0]

    async def fast(request):
        await request.read()
        return web.Response(text="ok")

    async def sleep(request):
        await request.read()
        await asyncio.sleep(int(request.match_info["ms"]) / 1000)
        return web.Response(text="ok")

    async def stall(request):
        await request.read()
        period = float(request.query.get("period_s", 4))
        pause = float(request.query.get("stall_s", 1))
        phase = (time.monotonic() - t0) % period
        if phase < pause:
            await asyncio.sleep(pause - phase)
        return web.Response(text="ok")

    async def bimodal(request):
        await request.read()
        bimodal_n[0] += 1
        every = int(request.query.get("every", 10))
        slow = bimodal_n[0] % every == 0
        ms = float(request.query.get("slow_ms" if slow else "fast_ms", 100 if slow else 10))
        await asyncio.sleep(ms / 1000)
        return web.Response(text="slow" if slow else "fast")

    async def status(request):
        await request.read()
        return web.Response(status=int(request.match_info["code"]), text="status")

    async def batched(request):
        try:
            body = json.loads(await request.read())
            feats = body["features"]
            if len(feats) != 256 or not all(isinstance(x, (int, float)) for x in feats):
                raise ValueError(f"features has {len(feats)} entries")
        except Exception as e:  # the reason goes back to the client
            return web.Response(status=400, text=f"bad batched body: {e}")
        return web.Response(text="ok")

    async def model(request):
        await request.read()
        mid = request.headers.get(MODEL_HEADER)
        if not mid:
            return web.Response(status=400, text=f"no {MODEL_HEADER} header")
        counts[mid] += 1
        return web.Response(text=mid)

    async def model_counts(request):
        return web.json_response(dict(counts))

    async def reset(request):
        counts.clear()
        return web.Response(text="ok")

    async def stream(request):
        await request.read()
        first = float(request.query.get("first_ms", 200)) / 1000
        chunks = int(request.query.get("chunks", 5))
        gap = float(request.query.get("gap_ms", 20)) / 1000
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            await asyncio.sleep(first)
            for i in range(chunks):
                if i:
                    await asyncio.sleep(gap)
                await resp.write(f"chunk {i}\n".encode())
            await resp.write_eof()
        except ConnectionError:
            pass  # the client went away (a stopped generator): nothing to report
        return resp

    async def openai_models(request):
        return web.json_response({"object": "list",
                                  "data": [{"id": "reference", "object": "model"}]})

    async def openai_completions(request):
        arrived = time.monotonic()
        body = await request.json()
        first = float(request.match_info["first_ms"]) / 1000
        every = float(request.match_info["every_ms"]) / 1000
        n = int(body.get("max_tokens", 16))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        try:
            for i in range(n):
                await asyncio.sleep(max(0.0, arrived + first + i * every - time.monotonic()))
                chunk = {"choices": [{"index": 0, "text": f"t{i} "}]}
                await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
            usage = {"choices": [], "usage": {"prompt_tokens": len(
                str(body.get("prompt", "")).split()), "completion_tokens": n}}
            await resp.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
            await resp.write_eof()
        except ConnectionError:
            pass
        return resp

    versions_n = [0]

    async def versions(request):
        await request.read()
        i = versions_n[0]
        versions_n[0] += 1
        v2 = i % 4 == 0
        await asyncio.sleep(0.020 if v2 else 0.002)
        failed = v2 and (i // 4) % 2 == 1
        return web.Response(status=500 if failed else 200, text="v2" if v2 else "v1",
                            headers={"x-serve-version": "v2" if v2 else "v1"})

    seen = {"count": 0, "last": None}

    @web.middleware
    async def count_requests(request, handler):
        if request.path != "/seen":
            seen["count"] += 1
            seen["last"] = time.time()
        return await handler(request)

    async def seen_route(request):
        return web.json_response(seen)

    app = web.Application(middlewares=[count_requests])
    app.router.add_route("GET", "/seen", seen_route)
    app.router.add_route("*", "/versions", versions)
    app.router.add_route("*", "/fast", fast)
    app.router.add_route("*", "/sleep/{ms}", sleep)
    app.router.add_route("*", "/stall", stall)
    app.router.add_route("*", "/bimodal", bimodal)
    app.router.add_route("*", "/status/{code}", status)
    app.router.add_route("*", "/batched", batched)
    app.router.add_route("*", "/model", model)
    app.router.add_route("GET", "/model-counts", model_counts)
    app.router.add_route("*", "/reset", reset)
    app.router.add_route("*", "/stream", stream)
    app.router.add_route("GET", "/openai/{first_ms}/{every_ms}/v1/models", openai_models)
    app.router.add_route("POST", "/openai/{first_ms}/{every_ms}/v1/completions",
                         openai_completions)
    return app


def main(argv: list[str] | None = None) -> None:
    from aiohttp import web

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def serve():
        runner = web.AppRunner(make_app(), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", args.port, backlog=4096)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        print(f"PORT {port}", flush=True)
        # Exit with the parent: stdin closes when it goes away.
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)
        await runner.cleanup()

    asyncio.run(serve())


class ReferenceServer(ChildServer):
    """The reference server in a child process: `with ReferenceServer() as url: …`."""

    def __init__(self) -> None:
        super().__init__("tests.support.reference_server", [], _url_from, "reference server")


def _url_from(line: str) -> str | None:
    return f"http://127.0.0.1:{int(line.split()[1])}" if line.startswith("PORT ") else None


if __name__ == "__main__":
    main()
