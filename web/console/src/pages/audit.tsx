// Audit: every mutation the Hub handled, accepted or rejected, newest
// first, filtered on the server by resource, node, actor, action and
// outcome.

import { get, type Page } from "../api";
import { NodeLink, ResourceLink } from "../oplog";
import type { PageDef, PageProps } from "../page";
import { href } from "../router";
import type { AuditRecord, HubEvent } from "../types";
import { Badge, Filters, Loaded, PageHeader, Pager, pageOf, SelectFilter, Table, TextFilter, Time, useResource, who } from "../ui";

const PAGE_SIZE = 50;
const FILTERS = ["resource_id", "node_id", "actor", "action", "outcome"] as const;
const LIVE_KINDS = new Set(["intent_accepted", "operation_cancelled", "node_maintenance_changed", "rollout_changed"]);
const live = (ev: HubEvent) => LIVE_KINDS.has(ev.kind);

function Audit(props: PageProps) {
  const q = props.query;
  const page = pageOf(q);
  const f: Record<string, string> = {};
  for (const k of FILTERS) f[k] = q.get(k) ?? "";
  const filtered = FILTERS.some((k) => f[k]);
  const res = useResource((s) => get<Page<AuditRecord>>("/audit", { ...f, page, page_size: PAGE_SIZE }, s), JSON.stringify([f, page]), live);
  return (
    <>
      <PageHeader title="Audit" sub="Every change asked of the Hub, who asked, and whether it was accepted or rejected (with the problem code), newest first. Live." />
      <Filters>
        <SelectFilter name="outcome" label="Outcome" value={f.outcome} options={["accepted", "rejected"]} />
        <TextFilter name="action" label="Action" value={f.action} placeholder="stream_desired_state" />
        <TextFilter name="actor" label="Actor" value={f.actor} />
        <TextFilter name="resource_id" label="Resource" value={f.resource_id} />
        <TextFilter name="node_id" label="Node" value={f.node_id} />
        {filtered ? (
          <a class="clear-filters" href={href("/audit")}>
            Clear filters
          </a>
        ) : null}
      </Filters>
      <Loaded
        res={res}
        empty={(p) =>
          p.items.length === 0
            ? filtered
              ? "No audit record matches these filters."
              : "Nothing audited yet: every write (desired state, actions, drain, maintenance, cancel, jobs, configuration, rollouts) is recorded here, accepted or rejected."
            : null
        }
      >
        {(p) => (
          <>
            <Table
              name="audit"
              caption="Audit records, newest first"
              rows={p.items}
              rowKey={(r) => String(r.id)}
              columns={[
                { key: "time", label: "Time", render: (r) => <Time at={r.occurred_at} /> },
                { key: "actor", label: "Actor", render: (r) => who(r) },
                { key: "action", label: "Action", render: (r) => <a href={href("/audit", { action: r.action })}>{r.action}</a> },
                {
                  key: "resource",
                  label: "Resource",
                  render: (r) =>
                    r.resource_id ? (
                      <>
                        {r.resource_type ? <span class="muted">{r.resource_type} </span> : null}
                        <ResourceLink type={r.resource_type} id={r.resource_id} node={r.node_id} />
                      </>
                    ) : (
                      <span class="muted">—</span>
                    ),
                },
                { key: "node", label: "Node", render: (r) => <NodeLink id={r.node_id} /> },
                { key: "outcome", label: "Outcome", render: (r) => <Badge value={r.outcome} /> },
                { key: "failure_code", label: "Failure code", render: (r) => (r.failure_code ? <code>{r.failure_code}</code> : "") },
                {
                  key: "correlation",
                  label: "Correlation id",
                  render: (r) =>
                    r.correlation_id ? (
                      <a class="mono" href={href("/operations", { correlation_id: r.correlation_id })} title={`Operations of request ${r.correlation_id}`}>
                        {r.correlation_id}
                      </a>
                    ) : (
                      ""
                    ),
                },
                { key: "message", label: "Message", render: (r) => r.message ?? "" },
              ]}
            />
            <Pager page={p.page} pageSize={p.page_size} total={p.total} />
          </>
        )}
      </Loaded>
    </>
  );
}

const pages: PageDef[] = [{ path: "/audit", name: "audit", title: "Audit", nav: "Audit", order: 6, component: Audit }];
export default pages;
