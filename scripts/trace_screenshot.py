#!/usr/bin/python3
"""A PNG screenshot of softrnic trace files (SOFTRNIC_TRACE) in a real
trace viewer: the Performance panel of Chromium's own DevTools, served
offline by the browser itself, driven headless over the Chrome DevTools
Protocol.

  scripts/trace_screenshot.py TRACE.json [TRACE2.json ...] -o OUT.png
      [--width 1600 --height 900] [--window START:END] [--select NAME]
      [--timeout 60] [--raw] [-v]

  e.g. scripts/trace_screenshot.py /tmp/softrnic-chaos-*/1-drop_0.05/trace-*.json \
           -o docs/img/fault-lab-trace.png --select selective_resend

Several trace files (e.g. the two processes of one run; they use the same
clock, CLOCK_MONOTONIC) are merged into one by concatenating their
traceEvents. The script then

  1. starts `chromium --headless=new` with a temporary profile and
     --remote-debugging-port=0 (the port is read from DevToolsActivePort),
  2. opens http://127.0.0.1:PORT/devtools/devtools_app.html?panel=timeline,
     the DevTools frontend that Chromium serves itself (no network needed),
  3. hands the merged file to the panel's hidden <input type=file>
     (DOM.setFileInputFiles: the same path as "Load profile..."),
  4. waits until the trace is parsed and the flame chart has its tracks,
     expands every process and QP track, hides the sidebar, shows the whole
     trace (or --window), selects the first --select event so that its
     details (args) show under the tracks, and saves Page.captureScreenshot.

Two changes to the events, for the picture only (--raw turns them off):

  - DevTools draws no instant events ("ph":"i"): retransmissions, RNR NAKs,
    completion errors, faults... Each one that is not a state change (the
    state slices show those) becomes a complete event a few pixels wide,
    with an arg "drawn_as" saying so; its "Duration" in the details pane is
    therefore not real.
  - DevTools adds ts + dur in doubles; when a state slice ends exactly where
    the next one starts, the sum can land a hair past the next ts and
    DevTools then drops the next slice (a whole RTS state went missing on
    the example trace). Such durations are trimmed by less than 1 ns.

Chromium is killed (its whole process group) in every case; the whole run
is bounded by --timeout and fails with a clear message instead of hanging.

Debian packages: chromium, python3-websocket (this script uses
/usr/bin/python3 so that Debian's python3-websocket is found even when
another python3 comes first on PATH).

chrome://tracing no longer exists in current Chromium and ui.perfetto.dev
needs the network; the DevTools Performance panel is what works offline.
It relies on DevTools frontend internals (the TimelinePanel module) for
expanding the tracks, zooming and selecting; if those change, the
screenshot is still taken, with a warning, showing the panel as it is.
"""
import argparse
import base64
import itertools
import json
import math
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

try:
    import websocket  # Debian: python3-websocket
except ImportError:
    sys.exit("trace_screenshot: python3-websocket is missing "
             "(apt-get install -y python3-websocket; run with /usr/bin/python3)")


class Timeout(Exception):
    pass


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds
        self.seconds = seconds

    def left(self, what):
        left = self.end - time.monotonic()
        if left <= 0:
            raise Timeout(f"timed out after {self.seconds:g} s while {what}")
        return left


def read_events(paths):
    """The traceEvents of the given files (JSON Object Format or a bare
    JSON array), concatenated, and the first displayTimeUnit."""
    events, sources, unit = [], [], None
    for p in paths:
        with open(p, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                sys.exit(f"trace_screenshot: {p}: not valid JSON ({e}); "
                         "was the traced process still running?")
        if isinstance(data, list):
            events.extend(data)
            continue
        events.extend(data.get("traceEvents", []))
        unit = unit or data.get("displayTimeUnit")
        sources.append({"file": os.path.basename(p), **(data.get("otherData") or {})})
    if not any(e.get("ph") not in ("M", None) for e in events):
        sys.exit("trace_screenshot: the trace files hold no events")
    return events, unit or "ns", sources


def below(limit, start):
    """The largest duration d with start + d <= limit in floating point
    (the viewer adds ts + dur in doubles)."""
    d = max(0.0, limit - start)
    while d > 0 and start + d > limit:
        d = math.nextafter(d, 0.0)
    return d


def fix_abutting_slices(events):
    """Back-to-back complete events (one QP state ending where the next
    begins) whose ts + dur, added in doubles, lands a hair (< 1 ns) past
    the next one's ts: DevTools then takes the next slice for a child that
    outlives its parent and drops it (e.g. a whole RTS state). Trim such a
    duration to end exactly where the next slice starts. Returns how many."""
    tracks = {}
    for e in events:
        if e.get("ph") == "X" and "ts" in e:
            tracks.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    fixed = 0
    for slices in tracks.values():
        slices.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
        for a, b in zip(slices, slices[1:]):
            end = a["ts"] + a.get("dur", 0)
            if a["ts"] < b["ts"] < end and end - b["ts"] < 0.001 \
                    and end < b["ts"] + b.get("dur", 0):
                a["dur"] = below(b["ts"], a["ts"])
                fixed += 1
    return fixed


def instants_as_slices(events, width_px):
    """DevTools' Performance panel does not draw thread-scoped instant
    events ("ph":"i") at all. For the picture, turn each one that is not a
    state change (those are the state slices already) into a short complete
    event of the same name, args and track, a few pixels wide at the
    whole-trace zoom, so it is drawn under the QP state it happened in.
    Its duration never reaches the next marker on the track nor the end of
    the enclosing slice, so nesting stays intact. Returns how many."""
    timed = [e for e in events if "ts" in e and e.get("ph") in ("X", "i", "I")]
    if not timed:
        return 0
    t0 = min(e["ts"] for e in timed)
    t1 = max(e["ts"] + (e.get("dur", 0) if e.get("ph") == "X" else 0) for e in timed)
    want = max(t1 - t0, 1.0) * 3.0 / max(width_px, 100)  # ~3 px
    slices, marks = {}, {}
    for e in timed:
        key = (e.get("pid"), e.get("tid"))
        if e["ph"] == "X":
            slices.setdefault(key, []).append(e)
        elif e.get("s", "t") == "t" and e.get("cat") != "state":
            marks.setdefault(key, []).append(e)
    n = 0
    for key, ms in marks.items():
        ms.sort(key=lambda e: e["ts"])
        ss = slices.get(key, [])
        for i, m in enumerate(ms):
            t = m["ts"]
            limit = t + want
            if i + 1 < len(ms):
                limit = min(limit, ms[i + 1]["ts"])
            for s in ss:
                end = s["ts"] + s.get("dur", 0)
                if s["ts"] <= t < end:
                    limit = min(limit, end)          # stay inside the enclosing state
                elif t < s["ts"]:
                    limit = min(limit, s["ts"])      # stop before the next one
            m["ph"] = "X"
            m["dur"] = below(limit, t)
            m.pop("s", None)
            m["args"] = {**(m.get("args") or {}),
                         "drawn_as": "instant event; its width is only for the picture"}
            n += 1
    return n


def write_trace(paths, out_path, width_px, raw, verbose):
    """One JSON Object Format file from the given traces (concatenated;
    softrnic's traces of one machine share CLOCK_MONOTONIC), made drawable
    by DevTools unless raw."""
    events, unit, sources = read_events(paths)
    if not raw:
        fixed = fix_abutting_slices(events)
        marks = instants_as_slices(events, width_px)
        if verbose:
            print(f"trace_screenshot: {len(events)} events from {len(paths)} file(s); "
                  f"{marks} instant events drawn as slices, "
                  f"{fixed} abutting slices trimmed", file=sys.stderr)
    merged = {"traceEvents": events, "displayTimeUnit": unit,
              "otherData": {"producer": "scripts/trace_screenshot.py",
                            "sources": json.dumps(sources)}}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(merged, f)


class CDP:
    """A minimal Chrome DevTools Protocol client over one websocket."""

    def __init__(self, url, deadline):
        self.deadline = deadline
        # suppress_origin: Chromium rejects websocket connections that carry
        # an Origin it does not know (--remote-allow-origins).
        self.ws = websocket.create_connection(
            url, timeout=deadline.left("connecting to Chromium"),
            suppress_origin=True)
        self.ids = itertools.count(1)

    def call(self, method, what=None, **params):
        what = what or f"waiting for {method}"
        i = next(self.ids)
        self.ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            self.ws.settimeout(max(0.1, self.deadline.left(what)))
            try:
                msg = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                self.deadline.left(what)
                continue
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expr, what=None):
        """Evaluate JavaScript in the page (promises awaited); return its
        JSON value, raising on an exception."""
        r = self.call("Runtime.evaluate", what, expression=expr, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError("JavaScript: " + d.get("exception", {}).get(
                "description", d.get("text", "?")))
        return r["result"].get("value")

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass


def find_chromium(explicit):
    for c in ([explicit] if explicit else ["chromium", "chromium-browser",
                                           "google-chrome"]):
        p = shutil.which(c)
        if p:
            return p
    sys.exit("trace_screenshot: no chromium found (apt-get install -y chromium)")


def start_chromium(binary, profile, width, height):
    args = [binary, "--headless=new", "--disable-gpu", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-sync",
            "--disable-component-update", "--mute-audio", "--hide-scrollbars",
            f"--user-data-dir={profile}", "--remote-debugging-port=0",
            "--remote-debugging-address=127.0.0.1",
            f"--window-size={width},{height}", "about:blank"]
    if os.geteuid() == 0:
        args.insert(1, "--no-sandbox")  # Chromium refuses to run as root otherwise
    log = open(os.path.join(profile, "chromium.log"), "wb")
    # Own process group, so that the zygote and renderers go with it.
    return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def stop_chromium(proc):
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            # The group may outlive its leader for a moment.
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            break
        except subprocess.TimeoutExpired:
            continue
        break
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def debugging_port(proc, profile, deadline):
    path = os.path.join(profile, "DevToolsActivePort")
    while True:
        if proc.poll() is not None:
            tail = pathlib.Path(profile, "chromium.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"chromium exited with status {proc.returncode}:\n{tail}")
        try:
            port = pathlib.Path(path).read_text().split()[0]
            if port.isdigit():
                return int(port)
        except (FileNotFoundError, IndexError):
            pass
        deadline.left("waiting for Chromium's debugging port")
        time.sleep(0.1)


def http_json(url, deadline, what):
    while True:
        try:
            with urllib.request.urlopen(url, timeout=min(5, deadline.left(what))) as r:
                return json.load(r)
        except OSError:
            deadline.left(what)
            time.sleep(0.2)


def poll(cdp, expr, deadline, what, interval=0.2):
    """Evaluate expr until it returns something truthy; return that."""
    while True:
        deadline.left(what)
        v = cdp.eval(expr, what)
        if v:
            return v
        deadline.left(what)
        time.sleep(interval)


# Settings the DevTools frontend keeps in its origin's localStorage, seeded
# before it starts: no "keyboard shortcuts" dialog over the flame chart, no
# insights/annotations sidebar. (The same is done again below through the
# panel's own objects, in case these names change.)
SEED_SETTINGS = {
    "timeline.user-had-shortcuts-dialog-opened-once": "true",
    "timeline-sidebar-opened-at-least-once": "true",
    "timeline-panel-sidebar-state": json.dumps(
        {"vertical": {"size": 0, "showMode": "OnlyMain"}}),
}

JS_PANEL = "(await import('/devtools/panels/timeline/timeline.js')).TimelinePanel.TimelinePanel.instance()"

# Every <input type=file> in the frontend, through its shadow roots.
JS_FILE_INPUTS = r"""(() => {
  const out = [];
  const walk = root => { for (const el of root.querySelectorAll('*')) {
    if (el.tagName === 'INPUT' && el.type === 'file') out.push(el);
    if (el.shadowRoot) walk(el.shadowRoot); } };
  walk(document);
  return out.filter(el => (el.accept || '').includes('.json'))[0] || null;
})()"""

JS_LOADED = r"""(async () => {
  const p = %s;
  const f = p.getFlameChart && p.getFlameChart();
  const m = f && f.getMainFlameChart();
  const td = m && m.timelineData();
  if (!td || !td.groups || !td.groups.length) return null;
  return td.groups.map(g => g.name);
})()""" % JS_PANEL

# Tidy the view; each step on its own so that one failing does not stop the
# rest. Filled in with the options: WINDOW (null or [start, end] in ms from
# the start of the trace) and SELECT (null or an event name).
JS_TIDY = r"""(async (WINDOW, SELECT) => {
  const warn = [];
  const step = (name, fn) => { try { fn(); } catch (e) { warn.push(name + ': ' + e.message); } };
  const T = await import('/devtools/panels/timeline/timeline.js');
  const p = T.TimelinePanel.TimelinePanel.instance();
  const f = p.getFlameChart();
  const m = f.getMainFlameChart();
  step('close the shortcuts dialog', () => {
    const walk = root => { for (const el of root.querySelectorAll('*')) {
      if (el.tagName === 'DIALOG' && el.open) el.close();
      if (el.shadowRoot) walk(el.shadowRoot); } };
    walk(document);
  });
  step('hide the sidebar', () => {
    const s = typeof p.splitWidget === 'function' ? p.splitWidget() : p.splitWidget;
    if (s && s.sidebarIsShowing && s.sidebarIsShowing()) s.hideSidebar();
  });
  step('expand the tracks', () => {
    const groups = m.timelineData().groups;
    for (let i = 0; i < groups.length; i++)
      if (!groups[i].expanded) m.toggleGroupExpand(i);
  });
  let win = null;
  try {
    const TB = (await import('/devtools/services/trace_bounds/trace_bounds.js')).TraceBounds;
    const bm = TB.BoundsManager.instance();
    const all = bm.state().micro.entireTraceBounds;
    win = all;
    if (WINDOW) {
      const min = all.min + WINDOW[0] * 1000, max = Math.min(all.max, all.min + WINDOW[1] * 1000);
      win = {min, max, range: max - min};
    }
    if (SELECT) {
      const pt = p.getParsedTraceForLayoutTests(); const R = (pt.data || pt).Renderer;
      let best = null;
      for (const proc of R.processes.values()) for (const th of proc.threads.values())
        for (const e of th.entries)
          if (e.name === SELECT && e.ts >= win.min && e.ts <= win.max && (!best || e.ts < best.ts)) best = e;
      if (best) p.select(T.TimelineSelection.selectionFromEvent(best));
      else warn.push('select ' + SELECT + ': no such event in the window');
    }
    bm.setTimelineVisibleWindow(win);
  } catch (e) { warn.push('set the visible window: ' + e.message); }
  if (!SELECT) step('hide the details pane', () => { f.detailsSplitWidget.hideSidebar(); });
  else step('size the details pane', () => {
    f.detailsSplitWidget.setSidebarSize(Math.round(window.innerHeight * 0.4)); });
  return {warnings: warn,
          tracks: m.timelineData().groups.map(g => [g.name, !!g.expanded])};
})"""


def screenshot(trace_path, out_path, binary, width, height, deadline, verbose,
               window=None, select=None):
    profile = tempfile.mkdtemp(prefix="trace-screenshot-")
    proc = cdp = None
    try:
        proc = start_chromium(binary, profile, width, height)
        port = debugging_port(proc, profile, deadline)
        base = f"http://127.0.0.1:{port}"
        version = http_json(f"{base}/json/version", deadline, "asking Chromium its version")
        if verbose:
            print(f"trace_screenshot: {version.get('Browser')} on port {port}", file=sys.stderr)
        targets = http_json(f"{base}/json/list", deadline, "listing Chromium's pages")
        pages = [t for t in targets if t.get("type") == "page"]
        if not pages:
            raise RuntimeError("Chromium has no page to drive")
        cdp = CDP(pages[0]["webSocketDebuggerUrl"], deadline)
        cdp.call("Page.enable")
        cdp.call("Runtime.enable")
        cdp.call("DOM.enable")
        cdp.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                 deviceScaleFactor=1, mobile=False)
        seed = "".join(f"localStorage.setItem({json.dumps(k)}, {json.dumps(v)});"
                       for k, v in SEED_SETTINGS.items())
        cdp.call("Page.addScriptToEvaluateOnNewDocument",
                 source=f"try {{ if (location.pathname.startsWith('/devtools/')) {{ {seed} }} }} catch (e) {{}}")

        frontend = f"{base}/devtools/devtools_app.html?panel=timeline"
        cdp.call("Page.navigate", url=frontend)
        what = "waiting for the DevTools Performance panel (" + frontend + ")"
        poll(cdp, f"(async () => {{ try {{ return !!({JS_PANEL}); }} catch (e) {{ return false; }} }})()",
             deadline, what)
        # The panel's hidden file input, as used by "Load profile...".
        while True:
            r = cdp.call("Runtime.evaluate", expression=JS_FILE_INPUTS)
            if r["result"].get("objectId"):
                break
            deadline.left("looking for the Performance panel's file input")
            time.sleep(0.2)
        cdp.call("DOM.getDocument", depth=-1, pierce=True)
        cdp.call("DOM.setFileInputFiles", files=[os.path.abspath(trace_path)],
                 objectId=r["result"]["objectId"])

        tracks = poll(cdp, JS_LOADED, deadline, "waiting for the trace to load "
                      "(is it trace-event JSON?)")
        if verbose:
            print("trace_screenshot: tracks: " + "; ".join(tracks), file=sys.stderr)
        tidy = cdp.eval(f"{JS_TIDY}({json.dumps(window)}, {json.dumps(select)})")
        for w in tidy.get("warnings", []):
            print(f"trace_screenshot: warning: could not {w}", file=sys.stderr)
        # Let the flame chart redraw (it draws on animation frames).
        cdp.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        time.sleep(1.0)
        cdp.eval("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
        shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)
        data = base64.b64decode(shot["data"])
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        with open(out_path, "wb") as f:
            f.write(data)
        return tidy.get("tracks", [])
    finally:
        if cdp:
            cdp.close()
        stop_chromium(proc)
        shutil.rmtree(profile, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(
        description="Screenshot softrnic trace JSON in Chromium's DevTools Performance panel.")
    ap.add_argument("traces", nargs="+", metavar="TRACE.json",
                    help="trace files (SOFTRNIC_TRACE); several are merged")
    ap.add_argument("-o", "--output", required=True, metavar="OUT.png")
    ap.add_argument("--width", type=int, default=1600)
    ap.add_argument("--height", type=int, default=900)
    ap.add_argument("--timeout", type=float, default=60,
                    help="give up after this many seconds (default 60)")
    ap.add_argument("--chromium", help="the browser binary (default: chromium on PATH)")
    ap.add_argument("--window", metavar="START:END",
                    help="show only this time range, in ms from the start of the "
                    "trace (default: the whole trace)")
    ap.add_argument("--select", metavar="NAME",
                    help="select the first event of this name in the window and "
                    "show its details (name, time, args) under the tracks")
    ap.add_argument("--raw", action="store_true",
                    help="load the (merged) events as they are: DevTools then "
                    "draws no instant events, and may drop a slice that abuts "
                    "the previous one")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()

    window = None
    if a.window:
        try:
            window = [float(x) for x in a.window.split(":")]
            if len(window) != 2 or not 0 <= window[0] < window[1]:
                raise ValueError
        except ValueError:
            ap.error("--window wants START:END in ms, 0 <= START < END")
    deadline = Deadline(a.timeout)

    # A backstop for anything that blocks without looking at the deadline,
    # and SIGTERM/SIGHUP turned into exceptions so that `finally` still
    # kills Chromium.
    def on_alarm(*_):
        raise Timeout(f"timed out after {a.timeout:g} s (hard limit)")

    def on_term(sig, _):
        raise SystemExit(f"trace_screenshot: killed by signal {sig}")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(int(a.timeout) + 10)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    binary = find_chromium(a.chromium)
    tmp = tempfile.mkdtemp(prefix="trace-merge-")
    try:
        trace = os.path.join(tmp, "trace.json")
        write_trace(a.traces, trace, a.width, a.raw, a.verbose)
        tracks = screenshot(trace, a.output, binary, a.width, a.height, deadline, a.verbose,
                            window, a.select)
    except Timeout as e:
        sys.exit(f"trace_screenshot: {e}")
    except (RuntimeError, OSError, websocket.WebSocketException) as e:
        sys.exit(f"trace_screenshot: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{a.output}: {len(tracks)} tracks: " + "; ".join(n for n, _ in tracks))


if __name__ == "__main__":
    main()
