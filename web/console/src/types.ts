// The Hub's records the shared parts of the console use. Field names are
// the operator API's (docs/hub-api.md); pages that need more of a record
// declare it next to themselves.

export type Convergence = "unknown" | "pending" | "applying" | "in_sync" | "degraded" | "blocked";
export const CONVERGENCES: Convergence[] = ["in_sync", "applying", "pending", "degraded", "blocked", "unknown"];
export const STREAM_STATES = ["starting", "running", "stopping", "stopped", "completed", "failed"];
export const OPERATION_STATES = ["pending", "dispatched", "acknowledged", "succeeded", "failed", "timed_out", "cancelled", "superseded"];

export interface HubInfo {
  api_prefix: string;
  /** sign_in is present when the Hub signs the console in through its identity provider. */
  sign_in?: SignInInfo;
}

export interface System {
  role: string;
  version?: string;
  protocol_version: number;
  api_prefix: string;
  storage: string;
  insecure_local: boolean;
  auth: boolean;
  started_at: string;
  /** ha is this Hub's part among the Hubs on one database (on SQLite: the leader). */
  ha?: { role: "leader" | "standby"; leader?: { id: string; address?: string }; epoch: number };
}

/** Whoami is GET /auth/whoami: who the signed-in credential is. */
export interface Whoami {
  principal: string;
  kind: string;
  roles: string[];
  scopes: string[];
  expires_at?: string;
  permissions: string[];
}

export interface Status {
  version?: string;
  started_at: string;
  uptime_ms: number;
  ready: boolean;
  storage: string;
  streams: { total: number; running: number; failed: number; convergence?: Partial<Record<Convergence, number>> };
  nodes: { total: number; online: number; unavailable: number; draining: number; maintenance: number };
  jobs?: { total: number; desired: Record<string, number>; observed: Record<string, number>; convergence: Partial<Record<Convergence, number>> };
}

export interface NodeView {
  node_id: string;
  status: "online" | "unavailable" | "unknown";
  mode: "active" | "draining" | "maintenance";
  version?: string;
  protocol_version?: number;
  boot_id?: string;
  capabilities?: string[];
  data_address?: string;
  /** The Hub's version when config_source is "hub", else the node's own id. */
  config_version?: string;
  config_source?: "hub" | "node";
  node_config_version?: string;
  registered_at?: string;
  lease_ttl_ms?: number;
  lease_expires_at?: string;
  session_expires_at?: string;
  last_report_at?: string;
  report_seq?: number;
  restarts?: number;
  streams?: number;
  queued_commands?: number;
  in_flight?: number;
  metrics?: Record<string, number>;
}

export interface Counters {
  received: number;
  sent: number;
  errors: number;
  dropped?: number;
  retries?: number;
  in_flight?: number;
  abandoned?: number;
}

export interface StreamView {
  id: string;
  node_id: string;
  desired?: { state: string; generation: number; config_version?: string; action_id?: string };
  observed?: {
    state: string;
    generation: number;
    config_version?: string;
    action_id?: string;
    counters?: Counters;
    last_error?: string;
    last_error_at?: string;
    reported_at?: string;
    stale?: boolean;
  };
  convergence: Convergence;
  convergence_reason?: string;
  /** The stream's definition in the Hub version its node runs, literal credentials masked (one stream's GET only). */
  configuration?: { config_version: string; definition: Record<string, unknown> };
  latest_operation?: Operation;
}

export interface Operation {
  operation_id: string;
  intent_id: string;
  attempt_id?: string;
  operation: string;
  node_id: string;
  resource_id: string;
  generation?: number;
  state: string;
  convergence?: Convergence;
  retry?: { count: number; next_at?: string };
  failure?: { class?: string; code?: string; message?: string };
  result?: unknown;
  observed?: unknown;
  correlation_id?: string;
  actor?: string;
  actor_kind?: string;
  created_at: string;
  updated_at?: string;
  dispatched_at?: string;
  acknowledged_at?: string;
  finished_at?: string;
  expires_at?: string;
}

export interface HubEvent {
  id: number;
  kind: string;
  occurred_at: string;
  node_id?: string;
  resource_id?: string;
  operation_id?: string;
  correlation_id?: string;
  actor?: string;
  actor_kind?: string;
  outcome?: string;
  message?: string;
  data?: Record<string, unknown>;
}

export interface AuditRecord {
  id: number;
  occurred_at: string;
  actor: string;
  actor_kind?: string;
  action: string;
  resource_type?: string;
  resource_id?: string;
  node_id?: string;
  correlation_id?: string;
  outcome: "accepted" | "rejected";
  failure_code?: string;
  message?: string;
}

/** SignInInfo names the Hub's identity provider and its sign-in paths (hub.json). */
export interface SignInInfo {
  provider: string;
  login: string;
  logout: string;
}
