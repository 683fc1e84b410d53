// The JSON API's shapes (pkg/ui: api.go, policies.go, pipeline.go).

export interface SessionInfo {
  loggedIn?: boolean; user?: string; tokenLogin?: boolean; tokenLoginEnabled?: boolean;
  csrfToken?: string; expires?: string; reason?: string;
}

export interface Condition { type: string; ok: boolean; reason?: string; message?: string }

export interface Component {
  name: string; node?: string; pod?: string; version?: string; ovsVersion?: string;
  podCount: number; subnets?: string[]; heartbeat?: string; heartbeatAgeSeconds: number;
  healthy: boolean; problem?: string; conditions: Condition[]; networkPolicies: number; connectedAgents?: number;
  pendingPolicies?: number;
}

export interface FeatureGate { component: string; name: string; enabled: boolean; implemented: boolean; note?: string; source: string }

export interface Summary {
  controller?: Component; controllerError?: string; agents: Component[];
  featureGates?: FeatureGate[]; featureGatesError?: string; time: string; staleAfterSeconds: number;
  policies: number; pendingPolicies: number; realizationError?: string;
}

export interface Endpoint { namespace: string; name: string; kind: string; ip?: string; node?: string }
export interface Endpoints { pods: Endpoint[]; services: Endpoint[] }

export interface TraceflowRow { node: string; role: string; component: string; table?: string; action: string; details?: string }
export interface TraceflowResult { name: string; phase: string; reason?: string; rows: TraceflowRow[]; dropped?: string; svg: string }

export interface Stats { sessions: number; packets: number; bytes: number }
export interface RuleView { direction: string; name?: string; action: string; peers: string; ports: string; appliedTo?: string; stats?: Stats }
export interface NodeRealization { node: string; state: string; message?: string }
export interface PolicyView {
  kind: string; namespace?: string; name: string; priority?: number; appliedTo: string;
  rules: RuleView[]; realization?: string; stats?: Stats; pods?: string[]; nodes?: NodeRealization[]; tierPriority?: number;
}
export interface TierView { name: string; priority: number; layer?: boolean; description?: string; policies: PolicyView[] }
export interface Policies { tiers: TierView[]; statsError?: string; computedError?: string }

export interface Pipeline { nodes: string[]; node?: string; svg: string; note?: string }

export interface FlowEdge { from: string; to: string; port: string; connections: number; bytes: number; denied: boolean; policies?: string }
export interface FlowRow { source: string; destination: string; protocol: string; service?: string; bytes: number; denied: boolean; policy?: string; end: string }
export interface Flows {
  available: boolean; message: string; howTo?: string[]; records: number; denied: number;
  edges: FlowEdge[]; recent: FlowRow[]; svg?: string;
}
