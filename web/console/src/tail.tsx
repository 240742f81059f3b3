// The live tail of a stream or a job: a Start/Stop button over the Hub's
// live tap (GET {prefix}/nodes/{node}/streams/{id}/tap, or .../jobs/{id}/tap),
// read with fetch as the event stream is (an EventSource cannot send the
// Authorization header), keeping the last TAIL_MAX messages and the count of
// samples dropped because the browser read too slowly. The node redacts
// secrets before anything leaves it; the Hub audits every tap.

import { useEffect, useRef, useState } from "preact/hooks";
import { headers, url } from "./api";
import { sseFrames } from "./live";
import { Section } from "./ui";

const TAIL_MAX = 50;

type TapMessage = { stage: string; sampled_at: string; payload: string; encoding: string; metadata?: Record<string, string> };
type Row = TapMessage & { n: number };

export function LiveTail(props: { path: string; what: string }) {
  const [running, setRunning] = useState(false);
  const [rows, setRows] = useState<Row[]>([]);
  const [dropped, setDropped] = useState(0);
  const [note, setNote] = useState("");
  const ctrl = useRef<AbortController | null>(null);
  useEffect(() => () => ctrl.current?.abort(), []);

  const stop = () => {
    ctrl.current?.abort();
    ctrl.current = null;
    setRunning(false);
  };
  const start = async () => {
    stop();
    const c = new AbortController();
    ctrl.current = c;
    setRows([]);
    setDropped(0);
    setNote("");
    setRunning(true);
    let n = 0;
    try {
      const resp = await fetch(url(props.path + "/tap", { rate: 10, duration: "5m" }), {
        headers: headers({ Accept: "text/event-stream" }),
        signal: c.signal,
        cache: "no-store",
        credentials: "same-origin",
      });
      if (!resp.ok || !resp.body) {
        let msg = "HTTP " + resp.status;
        try {
          msg = ((await resp.json()) as { message?: string }).message ?? msg;
        } catch {
          /* not a problem envelope */
        }
        setNote("The tap could not start: " + msg);
        setRunning(false);
        return;
      }
      for await (const f of sseFrames(resp.body)) {
        if (!f.data) continue;
        try {
          const v = JSON.parse(f.data);
          if (f.event === "message") {
            const row = { ...(v as TapMessage), n: ++n };
            setRows((rs) => [row, ...rs].slice(0, TAIL_MAX));
          } else if (f.event === "dropped") setDropped((v as { dropped: number }).dropped);
          else if (f.event === "end") {
            setDropped((v as { dropped: number }).dropped);
            setNote("The tap ended (" + (v as { reason: string }).reason + ").");
          }
        } catch {
          /* a malformed event is skipped */
        }
      }
    } catch {
      /* stopped, or the connection dropped */
    }
    if (ctrl.current === c) {
      ctrl.current = null;
      setRunning(false);
    }
  };

  return (
    <Section
      title="Live tail"
      actions={
        running ? (
          <button type="button" data-tail="stop" onClick={stop}>
            Stop tail
          </button>
        ) : (
          <button type="button" data-tail="start" onClick={() => void start()}>
            Start tail
          </button>
        )
      }
    >
      <p class="muted">
        Sampled messages of {props.what}, newest first (at most 10 a second, the last {TAIL_MAX} kept; secrets redacted by the node; every tap is audited).
        {dropped > 0 ? <span data-tail="dropped"> {dropped} dropped while the page read too slowly.</span> : null}
      </p>
      {note ? <p data-tail="note">{note}</p> : null}
      {rows.length > 0 ? (
        <table class="table" data-tail="rows">
          <thead>
            <tr>
              <th>sampled</th>
              <th>stage</th>
              <th>payload</th>
              <th>metadata</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.n} data-tail="row">
                <td class="mono">{r.sampled_at}</td>
                <td class="mono">{r.stage}</td>
                <td class="mono">{r.encoding === "base64" ? "base64:" + r.payload : r.payload}</td>
                <td class="mono">
                  {Object.entries(r.metadata ?? {})
                    .map(([k, v]) => k + "=" + v)
                    .join(" ")}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : running ? (
        <p class="muted">Waiting for messages…</p>
      ) : null}
    </Section>
  );
}
