{{- define "connector-mcp.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "connector-mcp.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "connector-mcp.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: controller-manager
{{- end -}}

{{- define "connector-mcp.gatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: gateway
{{- end -}}

{{/* The image reference: repository@digest when image.digest is set, else repository:tag. */}}
{{- define "connector-mcp.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Trust, egress and TLS flags (internal/appoptions, Shared.BindFlags) shared by the manager and the gateway. */}}
{{- define "connector-mcp.verifyArgs" -}}
{{- $p := .Values.policy -}}
{{- if $p.skipProvenanceUnsafe }}
- --skip-provenance-unsafe
{{- end }}
{{- if $p.keylessWithoutTlogUnsafe }}
- --keyless-without-tlog-unsafe
{{- end }}
{{- if $p.keylessRequireSignedTimestamp }}
- --keyless-require-signed-timestamp
{{- end }}
- --exchange-timeout={{ $p.exchangeTimeout }}
- --max-response-bytes={{ int64 $p.maxResponseBytes }}
{{- with $p.defaultIdentity }}
{{- if .issuer }}
- --default-identity-issuer={{ .issuer }}
{{- end }}
{{- if .subject }}
- --default-identity-subject={{ .subject }}
{{- end }}
{{- if .subjectRegExp }}
- --default-identity-subject-regexp={{ .subjectRegExp }}
{{- end }}
{{- end }}
{{- if or $p.defaultPublicKey.configMapName $p.defaultPublicKey.secretName }}
- --default-public-key=/etc/connector-mcp/public-key/{{ $p.defaultPublicKey.key }}
{{- end }}
{{- with $p.defaultProvenance }}
{{- if .builderID }}
- --default-builder-id={{ .builderID }}
{{- end }}
{{- if .sourceRepository }}
- --default-source-repository={{ .sourceRepository }}
{{- end }}
{{- if .sourceRef }}
- --default-source-ref={{ .sourceRef }}
{{- end }}
{{- end }}
{{- range $p.egressAllowCIDRs }}
- --egress-allow-cidr={{ . }}
{{- end }}
{{- range $p.serviceCIDRs }}
- --service-cidr={{ . }}
{{- end }}
{{- if $p.trustedRootConfigMap }}
- --trusted-root=/etc/connector-mcp/trusted-root/trusted_root.json
{{- end }}
{{- if $p.trustedRootTUF.url }}
- --trusted-root-tuf-url={{ $p.trustedRootTUF.url }}
- --trusted-root-tuf-root=/etc/connector-mcp/tuf/root.json
{{- end }}
{{- if .Values.caBundle.configMapName }}
- --ca-bundle-file=/etc/connector-mcp/ca/ca.crt
{{- end }}
{{- end -}}

{{/* Volume mounts for the trust material and the CA bundle. */}}
{{- define "connector-mcp.verifyMounts" -}}
- name: tmp
  mountPath: /tmp
{{- if .Values.policy.trustedRootConfigMap }}
- name: trusted-root
  mountPath: /etc/connector-mcp/trusted-root
  readOnly: true
{{- end }}
{{- if .Values.policy.trustedRootTUF.url }}
- name: trusted-root-tuf
  mountPath: /etc/connector-mcp/tuf
  readOnly: true
{{- end }}
{{- if or .Values.policy.defaultPublicKey.configMapName .Values.policy.defaultPublicKey.secretName }}
- name: public-key
  mountPath: /etc/connector-mcp/public-key
  readOnly: true
{{- end }}
{{- if .Values.caBundle.configMapName }}
- name: ca-bundle
  mountPath: /etc/connector-mcp/ca
  readOnly: true
{{- end }}
{{- end -}}

{{- define "connector-mcp.verifyVolumes" -}}
- name: tmp
  emptyDir:
    sizeLimit: 16Mi
{{- if .Values.policy.trustedRootConfigMap }}
- name: trusted-root
  configMap:
    name: {{ .Values.policy.trustedRootConfigMap }}
    items:
    - key: trusted_root.json
      path: trusted_root.json
{{- end }}
{{- if .Values.policy.trustedRootTUF.url }}
- name: trusted-root-tuf
  configMap:
    name: {{ required "policy.trustedRootTUF.rootConfigMap is required with policy.trustedRootTUF.url" .Values.policy.trustedRootTUF.rootConfigMap }}
    items:
    - key: root.json
      path: root.json
{{- end }}
{{- with .Values.policy.defaultPublicKey }}
{{- if .configMapName }}
- name: public-key
  configMap:
    name: {{ .configMapName }}
    items:
    - key: {{ .key }}
      path: {{ .key }}
{{- else if .secretName }}
- name: public-key
  secret:
    secretName: {{ .secretName }}
    items:
    - key: {{ .key }}
      path: {{ .key }}
{{- end }}
{{- end }}
{{- if .Values.caBundle.configMapName }}
- name: ca-bundle
  configMap:
    name: {{ .Values.caBundle.configMapName }}
    items:
    - key: {{ .Values.caBundle.key }}
      path: ca.crt
{{- end }}
{{- end -}}

{{/* Restricted Pod Security: pod and container security contexts. */}}
{{- define "connector-mcp.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "connector-mcp.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
  - ALL
{{- end -}}

{{/* Default topology spread: across nodes and zones, without blocking scheduling. */}}
{{- define "connector-mcp.topologySpread" -}}
{{- $sel := index . 1 -}}
{{- $ctx := index . 0 -}}
{{- if $ctx.Values.topologySpreadConstraints }}
{{- toYaml $ctx.Values.topologySpreadConstraints }}
{{- else }}
- maxSkew: 1
  topologyKey: kubernetes.io/hostname
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- $sel | nindent 6 }}
- maxSkew: 1
  topologyKey: topology.kubernetes.io/zone
  whenUnsatisfiable: ScheduleAnyway
  labelSelector:
    matchLabels:
      {{- $sel | nindent 6 }}
{{- end }}
{{- end -}}
