{{/* The chart's name: nameOverride or the chart name (app.kubernetes.io/name). */}}
{{- define "connector-mcp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object name: fullnameOverride, or the release name followed by the
chart's name unless the release name contains it. At most 55 characters, so that the
"-gateway" and "-metrics" Services stay valid DNS labels. */}}
{{- define "connector-mcp.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "connector-mcp.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The gateway's object names (Deployment, Service, ServiceAccount, RBAC, Certificate). */}}
{{- define "connector-mcp.gatewayName" -}}
{{- printf "%s-gateway" (include "connector-mcp.fullname" .) -}}
{{- end -}}

{{/* The manager's ServiceAccount: the chart's own (serviceAccount.create), or an existing one
named serviceAccount.name; either way every binding of the chart names it. */}}
{{- define "connector-mcp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "connector-mcp.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required with serviceAccount.create=false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The gateway's ServiceAccount, likewise (gateway.serviceAccount). */}}
{{- define "connector-mcp.gatewayServiceAccountName" -}}
{{- if .Values.gateway.serviceAccount.create -}}
{{- default (include "connector-mcp.gatewayName" .) .Values.gateway.serviceAccount.name -}}
{{- else -}}
{{- required "gateway.serviceAccount.name is required with gateway.serviceAccount.create=false" .Values.gateway.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the gateway's serving certificate: gateway.tls.secretName, or with
gateway.tls.certManager the Secret its Certificate writes (default <gateway>-tls). */}}
{{- define "connector-mcp.gatewayTLSSecret" -}}
{{- default (printf "%s-tls" (include "connector-mcp.gatewayName" .)) .Values.gateway.tls.secretName -}}
{{- end -}}

{{/* The host names the gateway answers for (--allowed-hosts) and its Certificate names, as a
JSON list: gateway.allowedHosts, or the Service's DNS names. */}}
{{- define "connector-mcp.gatewayHosts" -}}
{{- $name := include "connector-mcp.gatewayName" . -}}
{{- $ns := .Release.Namespace -}}
{{- .Values.gateway.allowedHosts | default (list $name (printf "%s.%s" $name $ns) (printf "%s.%s.svc" $name $ns) (printf "%s.%s.svc.cluster.local" $name $ns)) | toJson -}}
{{- end -}}

{{/* One command-line argument "--name=value", quoted: a value with ": ", "#", a leading "*" or
any other YAML syntax is passed byte for byte. Call with (list "name" value). */}}
{{- define "connector-mcp.arg" -}}
{{- printf "--%s=%v" (index . 0) (index . 1) | quote -}}
{{- end -}}

{{- define "connector-mcp.labels" -}}
app.kubernetes.io/name: {{ include "connector-mcp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "connector-mcp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "connector-mcp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: controller-manager
{{- end -}}

{{- define "connector-mcp.gatewaySelectorLabels" -}}
app.kubernetes.io/name: {{ include "connector-mcp.name" . }}
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

{{/* Trust, egress and TLS flags (internal/appoptions, Shared.BindFlags) shared by the manager and the gateway.
Every value is quoted (connector-mcp.arg). */}}
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
- {{ include "connector-mcp.arg" (list "exchange-timeout" $p.exchangeTimeout) }}
- {{ include "connector-mcp.arg" (list "max-response-bytes" (int64 $p.maxResponseBytes)) }}
{{- with $p.defaultIdentity }}
{{- if .issuer }}
- {{ include "connector-mcp.arg" (list "default-identity-issuer" .issuer) }}
{{- end }}
{{- if .subject }}
- {{ include "connector-mcp.arg" (list "default-identity-subject" .subject) }}
{{- end }}
{{- if .subjectRegExp }}
- {{ include "connector-mcp.arg" (list "default-identity-subject-regexp" .subjectRegExp) }}
{{- end }}
{{- end }}
{{- if or $p.defaultPublicKey.configMapName $p.defaultPublicKey.secretName }}
- {{ include "connector-mcp.arg" (list "default-public-key" (printf "/etc/connector-mcp/public-key/%s" $p.defaultPublicKey.key)) }}
{{- end }}
{{- with $p.defaultProvenance }}
{{- if .builderID }}
- {{ include "connector-mcp.arg" (list "default-builder-id" .builderID) }}
{{- end }}
{{- if .sourceRepository }}
- {{ include "connector-mcp.arg" (list "default-source-repository" .sourceRepository) }}
{{- end }}
{{- if .sourceRef }}
- {{ include "connector-mcp.arg" (list "default-source-ref" .sourceRef) }}
{{- end }}
{{- end }}
{{- range $p.egressAllowCIDRs }}
- {{ include "connector-mcp.arg" (list "egress-allow-cidr" .) }}
{{- end }}
{{- range $p.serviceCIDRs }}
- {{ include "connector-mcp.arg" (list "service-cidr" .) }}
{{- end }}
{{- if $p.trustedRootConfigMap }}
- --trusted-root=/etc/connector-mcp/trusted-root/trusted_root.json
{{- end }}
{{- if $p.trustedRootTUF.url }}
- {{ include "connector-mcp.arg" (list "trusted-root-tuf-url" $p.trustedRootTUF.url) }}
{{- if $p.trustedRootTUF.rootConfigMap }}
- --trusted-root-tuf-root=/etc/connector-mcp/tuf/root.json
{{- end }}
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
{{- if .Values.policy.trustedRootTUF.rootConfigMap }}
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
    name: {{ .Values.policy.trustedRootConfigMap | quote }}
    items:
    - key: trusted_root.json
      path: trusted_root.json
{{- end }}
{{- if and .Values.policy.trustedRootTUF.url (ne .Values.policy.trustedRootTUF.url "https://tuf-repo-cdn.sigstore.dev") (ne .Values.policy.trustedRootTUF.url "none") (not .Values.policy.trustedRootTUF.rootConfigMap) }}
{{- fail "policy.trustedRootTUF.rootConfigMap is required with policy.trustedRootTUF.url (except for public-good Sigstore, https://tuf-repo-cdn.sigstore.dev, and none)" }}
{{- end }}
{{- if and (eq .Values.policy.trustedRootTUF.url "none") .Values.policy.trustedRootTUF.rootConfigMap }}
{{- fail "policy.trustedRootTUF.rootConfigMap anchors a TUF repository: it cannot go with policy.trustedRootTUF.url=none" }}
{{- end }}
{{- if .Values.policy.trustedRootTUF.rootConfigMap }}
- name: trusted-root-tuf
  configMap:
    name: {{ .Values.policy.trustedRootTUF.rootConfigMap | quote }}
    items:
    - key: root.json
      path: root.json
{{- end }}
{{- with .Values.policy.defaultPublicKey }}
{{- if .configMapName }}
- name: public-key
  configMap:
    name: {{ .configMapName | quote }}
    items:
    - key: {{ .key | quote }}
      path: {{ .key | quote }}
{{- else if .secretName }}
- name: public-key
  secret:
    secretName: {{ .secretName | quote }}
    items:
    - key: {{ .key | quote }}
      path: {{ .key | quote }}
{{- end }}
{{- end }}
{{- if .Values.caBundle.configMapName }}
- name: ca-bundle
  configMap:
    name: {{ .Values.caBundle.configMapName | quote }}
    items:
    - key: {{ .Values.caBundle.key | quote }}
      path: ca.crt
{{- end }}
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

{{/* The manager's and the gateway's OpenTelemetry environment (docs/observability.md): nothing unless
tracing.endpoint is set. */}}
{{- define "connector-mcp.tracingEnv" -}}
{{- $t := .Values.tracing -}}
{{- if $t.endpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $t.endpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ $t.protocol | quote }}
{{- if $t.insecure }}
- name: OTEL_EXPORTER_OTLP_INSECURE
  value: "true"
{{- end }}
- name: OTEL_TRACES_SAMPLER
  value: {{ $t.sampler | quote }}
{{- with $t.samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The audit trail (docs/observability.md#audit), in the manager and the gateway alike: --audit-log
and, for a webhook sink with webhookBearerSecret, the token mounted as a file.
*/}}
{{- define "connector-mcp.auditBearer" -}}
{{- if and (hasPrefix "https://" .Values.audit.sink) .Values.audit.webhookBearerSecret.name -}}true{{- end -}}
{{- end }}

{{- define "connector-mcp.auditArgs" -}}
- {{ include "connector-mcp.arg" (list "audit-log" .Values.audit.sink) }}
{{- if include "connector-mcp.auditBearer" . }}
- --audit-webhook-bearer-file=/etc/connector-mcp-audit-webhook/token
{{- end }}
{{- end }}

{{- define "connector-mcp.auditMounts" -}}
{{- if include "connector-mcp.auditBearer" . }}
- name: audit-webhook-bearer
  mountPath: /etc/connector-mcp-audit-webhook
  readOnly: true
{{- end }}
{{- end }}

{{- define "connector-mcp.auditVolumes" -}}
{{- if include "connector-mcp.auditBearer" . }}
- name: audit-webhook-bearer
  secret:
    secretName: {{ .Values.audit.webhookBearerSecret.name | quote }}
    items:
    - key: {{ .Values.audit.webhookBearerSecret.key | quote }}
      path: token
{{- end }}
{{- end }}
