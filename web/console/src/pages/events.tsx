// Events: a live tail of the Hub's event log. The latest 100 matching the
// URL's filters come from GET /events; then every live event that matches
// the same filters is put on top, at most 500 rows kept. Pause freezes the
// list (and counts what arrives) without touching the shell's live switch.

import { useEffect, useRef, useState } from "preact/hooks";
import { get, type Page } from "../api";
import { useEvents } from "../live";
import { EVENT_KINDS, eventResourceType, JSONBlock, matchesEventFilter, NodeLink, OperationLink, ResourceLink } from "../oplog";
import type { PageDef, PageProps } from "../page";
import { href, setQuery } from "../router";
import type { HubEvent } from "../types";
import { Badge, Filters, Loaded, num, PageHeader, SelectFilter, Table, TextFilter, Time, useResource, who } from "../ui";

const INITIAL = 100;
const KEEP = 500;
const FILTERS = ["kind", "node_id", "resource_id", "operation_id", "correlation_id"] as const;

/** merge puts a and b together, newest (highest id) first, without duplicates, at most KEEP. */
function merge(a: HubEvent[], b: HubEvent[]): HubEvent[] {
  const seen = new Set<number>();
  const out: HubEvent[] = [];
  for (const ev of [...a, ...b].sort((x, y) => y.id - x.id)) {
    if (seen.has(ev.id)) continue;
    seen.add(ev.id);
    out.push(ev);
    if (out.length >= KEEP) break;
  }
  return out;
}

function Events(props: PageProps) {
  const q = props.query;
  const f: Record<string, string> = {};
  for (const k of FILTERS) f[k] = q.get(k) ?? "";
  const key = JSON.stringify(f);
  const filtered = FILTERS.some((k) => f[k]);

  // The initial page; useResource re-fetches it on a resync or reconnect
  // (its live matcher takes no single event: those are appended below).
  const res = useResource((s) => get<Page<HubEvent>>("/events", { ...f, page_size: INITIAL }, s), key, () => false);

  // Live events received since the page was loaded (newest first).
  const [live, setLive] = useState<HubEvent[]>([]);
  const [paused, setPaused] = useState(false);
  const [arrived, setArrived] = useState(0);
  const [frozen, setFrozen] = useState<HubEvent[] | null>(null);
  const fref = useRef(f);
  fref.current = f;
  const pausedRef = useRef(paused);
  pausedRef.current = paused;

  // Other filters: another tail, followed from its start.
  useEffect(() => {
    setLive([]);
    setArrived(0);
    setPaused(false);
    setFrozen(null);
  }, [key]);

  useEvents((ev) => {
    if (ev === null) {
      // Events were lost, or the connection came back: the re-fetched page is
      // the truth; what was received live is dropped (ids may have restarted).
      setLive([]);
      return;
    }
    if (!matchesEventFilter(ev, fref.current)) return;
    setLive((cur) => merge([ev], cur));
    if (pausedRef.current) setArrived((n) => n + 1);
  });

  // Periodic checkpoints (no operation) come every interval of every
  // running job: they can be hidden (hide_periodic=1 in the URL).
  const hidePeriodic = q.get("hide_periodic") === "1";
  const periodic = (ev: HubEvent) => ev.kind === "checkpoint_completed" && !ev.operation_id;
  const rows = merge(live, res.data?.items ?? []);
  const all = paused && frozen ? frozen : rows;
  const shown = hidePeriodic ? all.filter((ev) => !periodic(ev)) : all;

  const toggle = () => {
    if (paused) {
      setPaused(false);
      setFrozen(null);
      setArrived(0);
    } else {
      setFrozen(rows);
      setPaused(true);
    }
  };

  return (
    <>
      <PageHeader title="Events" sub={`What happens in the fleet, as it happens: the latest ${INITIAL} from the Hub's log, then every new event on top (at most ${KEEP} kept here).`}>
        <span class="tail-state" data-tail={paused ? "paused" : "live"} role="status">
          {paused ? (arrived ? `${num(arrived)} new event${arrived === 1 ? "" : "s"}` : "Paused: no new event yet") : "Following"}
        </span>
        <button type="button" class={paused ? "primary" : ""} data-tail-toggle aria-pressed={paused} onClick={toggle}>
          {paused ? "Resume" : "Pause"}
        </button>
      </PageHeader>
      <Filters>
        <SelectFilter name="kind" label="Kind" value={EVENT_KINDS.includes(f.kind) || !f.kind ? f.kind : ""} options={EVENT_KINDS} />
        <TextFilter name="kind" label="Kinds (comma-separated)" value={f.kind} placeholder="command_failed,command_timed_out" />
        <TextFilter name="node_id" label="Node" value={f.node_id} />
        <TextFilter name="resource_id" label="Resource" value={f.resource_id} />
        <TextFilter name="operation_id" label="Operation" value={f.operation_id} />
        <TextFilter name="correlation_id" label="Correlation id" value={f.correlation_id} />
        <label class="check">
          <input
            type="checkbox"
            name="hide_periodic"
            checked={hidePeriodic}
            onChange={(e) => setQuery({ hide_periodic: (e.currentTarget as HTMLInputElement).checked ? "1" : "" })}
          />
          Hide periodic checkpoints
        </label>
        {filtered ? (
          <a class="clear-filters" href={href("/events")}>
            Clear filters
          </a>
        ) : null}
      </Filters>
      <Loaded
        res={res}
        empty={() =>
          shown.length === 0
            ? filtered
              ? "No event matches these filters yet; new ones appear here as they happen."
              : "No event yet: they appear here as nodes register, report and carry out writes."
            : null
        }
      >
        {() => (
          <>
            <Table
              name="events"
              caption="Events, newest first"
              rows={shown}
              rowKey={(ev) => String(ev.id)}
              columns={[
                { key: "id", label: "Id", class: "num", render: (ev) => String(ev.id) },
                { key: "time", label: "Time", render: (ev) => <Time at={ev.occurred_at} /> },
                { key: "kind", label: "Kind", render: (ev) => <Badge value={ev.kind} /> },
                { key: "node", label: "Node", render: (ev) => <NodeLink id={ev.node_id} /> },
                { key: "resource", label: "Resource", render: (ev) => <ResourceLink type={eventResourceType(ev)} id={ev.resource_id} node={ev.node_id} /> },
                { key: "operation", label: "Operation", render: (ev) => <OperationLink id={ev.operation_id} /> },
                { key: "actor", label: "Actor", render: (ev) => who(ev) },
                { key: "outcome", label: "Outcome", render: (ev) => (ev.outcome ? <Badge value={ev.outcome} /> : "") },
                { key: "message", label: "Message", render: (ev) => ev.message ?? "" },
                {
                  key: "data",
                  label: "Data",
                  render: (ev) =>
                    ev.data && Object.keys(ev.data).length ? (
                      <details class="event-data">
                        <summary>{summary(ev.data)}</summary>
                        <JSONBlock value={ev.data} label={`Data of event ${ev.id}`} />
                      </details>
                    ) : (
                      <span class="muted">—</span>
                    ),
                },
              ]}
            />
            <p class="muted">
              {num(shown.length)} event{shown.length === 1 ? "" : "s"} shown
              {res.data && res.data.total > res.data.items.length ? ` (the Hub's log holds ${num(res.data.total)} matching; this tail starts from the latest ${INITIAL})` : ""}.
            </p>
          </>
        )}
      </Loaded>
    </>
  );
}

/** summary is a one-line preview of an event's data. */
function summary(d: Record<string, unknown>): string {
  const s = Object.entries(d)
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
  return s.length > 60 ? s.slice(0, 57) + "…" : s;
}

const pages: PageDef[] = [{ path: "/events", name: "events", title: "Events", nav: "Events", order: 5, component: Events }];
export default pages;
