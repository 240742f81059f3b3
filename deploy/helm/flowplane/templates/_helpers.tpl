{{/*
The release's full name, the prefix of every object: "<release>-flowplane",
or the release name alone when it already holds the chart's name.
*/}}
{{- define "flowplane.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "flowplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; "component" (hub or node) is passed in. */}}
{{- define "flowplane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "flowplane.selectorLabels" . }}
app.kubernetes.io/version: {{ include "flowplane.imageTag" .ctx | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: flowplane
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels that select a component's pods. */}}
{{- define "flowplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "flowplane.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "flowplane.imageTag" -}}
{{- .Values.image.tag | default .Chart.AppVersion -}}
{{- end -}}

{{- define "flowplane.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "flowplane.imageTag" .) -}}
{{- end -}}

{{- define "flowplane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flowplane.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the tokens: the user's, or the chart's. */}}
{{- define "flowplane.tokensSecret" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else -}}
{{- printf "%s-tokens" (include "flowplane.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/* The Hub's Service, which nodes of this release join. */}}
{{- define "flowplane.hubService" -}}
{{- printf "%s-hub" (include "flowplane.fullname" .) -}}
{{- end -}}

{{- define "flowplane.hubURL" -}}
{{- printf "http://%s.%s.svc:%d" (include "flowplane.hubService" .) .Release.Namespace (int .Values.hub.service.port) -}}
{{- end -}}

{{/* The Hub URLs a node joins. */}}
{{- define "flowplane.nodeHubURLs" -}}
{{- if .Values.node.hubURLs -}}
{{- toJson .Values.node.hubURLs -}}
{{- else -}}
{{- toJson (list (include "flowplane.hubURL" .)) -}}
{{- end -}}
{{- end -}}

{{/*
The node's health_check: the user's, with the listener, the tokens, the
node id and the Hub set by the chart. Tokens are ${env:...} references to
variables the pod reads from the tokens Secret, never values.
*/}}
{{- define "flowplane.nodeHealthCheck" -}}
{{- $hc := deepCopy (.Values.node.config.health_check | default dict) -}}
{{- $_ := set $hc "enabled" true -}}
{{- $_ := set $hc "address" (printf ":%d" (int .Values.node.port)) -}}
{{- $_ := set $hc "api_token" "${env:FLOWPLANE_API_TOKEN}" -}}
{{- $_ := set $hc "node_id" "${env:FLOWPLANE_NODE_ID}" -}}
{{- if .Values.node.joinHub -}}
{{- $_ := set $hc "hub_urls" (include "flowplane.nodeHubURLs" . | fromJsonArray) -}}
{{- $_ := set $hc "node_token" "${env:SVC_NODE_TOKEN}" -}}
{{- end -}}
{{- if .Values.node.dataPort -}}
{{- $_ := set $hc "data_port" (int .Values.node.dataPort) -}}
{{- $_ := set $hc "data_host" "${env:FLOWPLANE_POD_IP}" -}}
{{- end -}}
{{- toJson $hc -}}
{{- end -}}

{{/* The node's configuration file. */}}
{{- define "flowplane.nodeConfig" -}}
{{- $cfg := deepCopy .Values.node.config -}}
{{- $_ := set $cfg "health_check" (include "flowplane.nodeHealthCheck" . | fromJson) -}}
{{- if not (hasKey $cfg "streams") -}}
{{- $_ := set $cfg "streams" (list) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* An HTTP probe of a container's "http" port. */}}
{{- define "flowplane.probe" -}}
httpGet:
  path: {{ .path }}
  port: http
periodSeconds: {{ .probe.periodSeconds }}
timeoutSeconds: {{ .probe.timeoutSeconds }}
failureThreshold: {{ .probe.failureThreshold }}
{{- end -}}

{{/* The /tmp volume every pod has. */}}
{{- define "flowplane.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: {{ .Values.tmpSizeLimit }}
{{- end -}}

{{/*
Checks of the values that would otherwise render a release that cannot
run; each fails the render with what to change.
*/}}
{{- define "flowplane.validate" -}}
{{- if and .Values.hub.enabled (not (has .Values.hub.storage (list "sqlite" "postgres"))) -}}
{{- fail (printf "hub.storage is sqlite or postgres, not %q" .Values.hub.storage) -}}
{{- end -}}
{{- if and .Values.hub.enabled (eq .Values.hub.storage "sqlite") (ne (int .Values.hub.replicas) 1) -}}
{{- fail "hub.storage=sqlite runs one Hub (the database file takes one writer): set hub.replicas=1, or hub.storage=postgres for several Hubs" -}}
{{- end -}}
{{- if and .Values.hub.enabled (eq .Values.hub.storage "postgres") (not .Values.hub.postgres.existingSecret) -}}
{{- fail "hub.storage=postgres reads the PostgreSQL URL (it holds a password) from a Secret: set hub.postgres.existingSecret" -}}
{{- end -}}
{{- range $k, $v := .Values.hub.env -}}
{{- if or (has $k (list "SVC_OPERATOR_TOKEN" "SVC_NODE_TOKEN" "SVC_HUB_STORAGE" "SVC_HUB_OIDC_CLIENT_SECRET" "SVC_HUB_ADDRESS")) (hasPrefix "SVC_SECRET_" $k) -}}
{{- fail (printf "hub.env.%s: set by the chart or secret; tokens come from auth, the storage from hub.storage, other secrets from hub.extraEnv with valueFrom" $k) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.node.enabled .Values.node.joinHub (not .Values.node.hubURLs) (not .Values.hub.enabled) -}}
{{- fail "node.joinHub with hub.enabled=false: set node.hubURLs to the Hub the nodes join, or node.joinHub=false for standalone nodes" -}}
{{- end -}}
{{- range $field, $key := .Values.auth.keys -}}
{{- $v := index $.Values.auth $field -}}
{{- if and $v (lt (len $v) 16) -}}
{{- fail (printf "auth.%s must be at least 16 characters (like the output of openssl rand -hex 32)" $field) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.auth.operatorToken (eq .Values.auth.operatorToken .Values.auth.nodeToken) -}}
{{- fail "auth.operatorToken and auth.nodeToken must differ: a node's token would otherwise open the operator API" -}}
{{- end -}}
{{- if not (or .Values.hub.enabled .Values.node.enabled) -}}
{{- fail "nothing to run: enable hub, node, or both" -}}
{{- end -}}
{{- end -}}
