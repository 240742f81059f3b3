{{/*
The Hub's pod template, the same for the StatefulSet (SQLite) and the
Deployment (PostgreSQL).
*/}}
{{- define "flowplane.hubPodTemplate" -}}
{{- $h := .Values.hub -}}
{{- $secret := include "flowplane.tokensSecret" . -}}
metadata:
  labels:
    {{- include "flowplane.selectorLabels" (dict "ctx" . "component" "hub") | nindent 4 }}
    {{- with $h.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $h.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "flowplane.serviceAccountName" . }}
  automountServiceAccountToken: false
  enableServiceLinks: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: {{ $h.terminationGracePeriodSeconds }}
  containers:
    - name: hub
      image: {{ include "flowplane.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["hub"]
      ports:
        - name: http
          containerPort: {{ $h.port }}
          protocol: TCP
      env:
        - name: SVC_HUB_ADDRESS
          value: {{ printf ":%d" (int $h.port) | quote }}
        {{- if eq $h.storage "sqlite" }}
        - name: SVC_HUB_STORAGE
          value: /var/lib/flowplane/hub.db
        - name: SVC_HUB_ADVERTISE_URL
          value: {{ include "flowplane.hubURL" . | quote }}
        {{- else }}
        - name: SVC_HUB_STORAGE
          valueFrom:
            secretKeyRef:
              name: {{ $h.postgres.existingSecret }}
              key: {{ $h.postgres.key }}
        # Each Hub's own address: the leader's, shown in GET /api/v1/system.
        - name: FLOWPLANE_POD_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        - name: SVC_HUB_ADVERTISE_URL
          value: {{ printf "http://$(FLOWPLANE_POD_IP):%d" (int $h.port) | quote }}
        {{- end }}
        - name: SVC_OPERATOR_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ $secret }}
              key: {{ .Values.auth.keys.operatorToken }}
        - name: SVC_NODE_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ $secret }}
              key: {{ .Values.auth.keys.nodeToken }}
        {{- range $k, $v := $h.env }}
        - name: {{ $k }}
          value: {{ $v | toString | quote }}
        {{- end }}
        {{- with $h.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      livenessProbe:
        {{- include "flowplane.probe" (dict "path" "/liveness" "probe" $h.livenessProbe) | nindent 8 }}
      readinessProbe:
        {{- include "flowplane.probe" (dict "path" "/readiness" "probe" $h.readinessProbe) | nindent 8 }}
      resources:
        {{- toYaml $h.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.containerSecurityContext | nindent 8 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if eq $h.storage "sqlite" }}
        - name: state
          mountPath: /var/lib/flowplane
        {{- end }}
        {{- with $h.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
  volumes:
    {{- include "flowplane.tmpVolume" . | nindent 4 }}
    {{- with $h.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $h.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $h.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $h.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $h.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end -}}
