{{/* Name prefix of every object: the release name when it contains the
chart name (release "edgesched" -> edgesched-agent, ...), else
"<release>-<chart>"; fullnameOverride wins. */}}
{{- define "edgesched.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "edgesched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; call with (dict "ctx" $ "component" "agent"). */}}
{{- define "edgesched.labels" -}}
app.kubernetes.io/name: {{ include "edgesched.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: edgesched
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels (immutable in Deployments, DaemonSets, StatefulSets). */}}
{{- define "edgesched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "edgesched.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* image reference: [REGISTRY/]REPOSITORY@DIGEST when the image has a
digest, else [REGISTRY/]REPOSITORY:TAG (TAG "": the chart's appVersion);
"own" images (the agent's, scheduler's and coordinator's) take their
registry from imageRegistry when it is set. Call with
(dict "ctx" $ "image" .Values.agent.image "own" true). */}}
{{- define "edgesched.image" -}}
{{- $reg := .image.registry | default "" -}}
{{- if and .own .ctx.Values.imageRegistry -}}{{- $reg = .ctx.Values.imageRegistry -}}{{- end -}}
{{- $name := .image.repository -}}
{{- if $reg -}}{{- $name = printf "%s/%s" $reg .image.repository -}}{{- end -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $name .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $name (default .ctx.Chart.AppVersion .image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Where the trusted coordinator keys are mounted (a directory: every
*.pub in it is trusted, quant.LoadKeyring). */}}
{{- define "edgesched.trustedKeysDir" -}}/etc/edgesched/trusted-keys{{- end -}}

{{/* The scheduler's user (its pod runs as it; the model-state directory
is handed to it). */}}
{{- define "edgesched.schedulerUID" -}}65532{{- end -}}

{{/* Where the scheduler's model-state hostPath is mounted in its pod, and
the state file in it (EdgePolicy's modelStatePath). */}}
{{- define "edgesched.schedulerStateDir" -}}/var/lib/edgesched-scheduler{{- end -}}
{{- define "edgesched.schedulerStateFile" -}}{{ include "edgesched.schedulerStateDir" . }}/plugin-state.db{{- end -}}

{{/* Whether a pod of the release needs the Pod Security "privileged"
level: the agent (hostPath, host network, eBPF capabilities) or the
scheduler's model-state hostPath (and the root init container that hands
it over). "true" or "". */}}
{{- define "edgesched.needsPrivileged" -}}
{{- if and .Values.site.enabled (or .Values.agent.enabled (and .Values.scheduler.enabled .Values.scheduler.modelState.hostPath)) -}}true{{- end -}}
{{- end -}}

{{/* NATS URL of the site leader: site.natsURL, else the leaf node. */}}
{{- define "edgesched.siteNatsURL" -}}
{{- if .Values.site.natsURL -}}
{{- .Values.site.natsURL -}}
{{- else if .Values.nats.leaf.enabled -}}
{{- printf "nats://%s-nats-leaf.%s.svc:%d" (include "edgesched.fullname" .) .Release.Namespace (int .Values.nats.leaf.port) -}}
{{- end -}}
{{- end -}}

{{/* Checks across values that the schema cannot express. */}}
{{- define "edgesched.validate" -}}
{{- if and .Values.site.enabled .Values.agent.enabled .Values.site.name (not (include "edgesched.siteNatsURL" .)) -}}
{{- fail "site.name is set but the site leader has no NATS server: set site.natsURL or nats.leaf.enabled" -}}
{{- end -}}
{{- if and .Values.site.enabled .Values.nats.leaf.enabled (not .Values.nats.leaf.remoteURL) (not .Values.nats.leaf.remoteURLSecret) -}}
{{- fail "nats.leaf.enabled needs the hub's leaf-node URL: nats.leaf.remoteURL or nats.leaf.remoteURLSecret" -}}
{{- end -}}
{{- if and .Values.site.dependenciesConfigMap (eq .Values.site.dependenciesConfigMap .Values.model.configMapName) -}}
{{- fail "site.dependenciesConfigMap must differ from model.configMapName: the dependency graph and the model have ConfigMaps of their own" -}}
{{- end -}}
{{- with .Values.site.topologyConfigMap -}}
{{- if or (eq . $.Values.model.configMapName) (eq . ($.Values.site.dependenciesConfigMap | default "")) -}}
{{- fail "site.topologyConfigMap must differ from model.configMapName and site.dependenciesConfigMap: each has a ConfigMap of its own" -}}
{{- end -}}
{{- end -}}
{{- with .Values.site.policyConfigMap -}}
{{- if or (eq . $.Values.model.configMapName) (eq . ($.Values.site.dependenciesConfigMap | default "")) (eq . ($.Values.site.topologyConfigMap | default "")) -}}
{{- fail "site.policyConfigMap must differ from model.configMapName, site.dependenciesConfigMap and site.topologyConfigMap: each has a ConfigMap of its own" -}}
{{- end -}}
{{- end -}}
{{- if not (or .Values.site.enabled .Values.cloud.enabled) -}}
{{- fail "nothing to install: site.enabled and cloud.enabled are both false" -}}
{{- end -}}
{{- end -}}
