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

{{/* A required node affinity on kubernetes.io/arch: the nodes of the
architectures in the list (the platforms of a pod's image). */}}
{{- define "edgesched.archNodeAffinity" -}}
requiredDuringSchedulingIgnoredDuringExecution:
  nodeSelectorTerms:
    - matchExpressions:
        - key: kubernetes.io/arch
          operator: In
          values: {{ toJson . }}
{{- end -}}

{{/* NATS URL of the site leader: site.natsURL, else the leaf node. */}}
{{- define "edgesched.siteNatsURL" -}}
{{- if .Values.site.natsURL -}}
{{- .Values.site.natsURL -}}
{{- else if .Values.nats.leaf.enabled -}}
{{- printf "nats://%s-nats-leaf.%s.svc:%d" (include "edgesched.fullname" .) .Release.Namespace (int .Values.nats.leaf.port) -}}
{{- end -}}
{{- end -}}

{{/* The cloud NATS servers: cloud.nats.cluster.replicas (1, 3 or 5). */}}
{{- define "edgesched.natsReplicas" -}}
{{- int .Values.cloud.nats.cluster.replicas -}}
{{- end -}}

{{/* Route URL of cloud NATS server i: its name under the headless
Service, the cluster port; call with (dict "ctx" $ "i" 0) and optionally
"userinfo" ("USER:PASS@"). */}}
{{- define "edgesched.natsRoute" -}}
{{- $fullname := include "edgesched.fullname" .ctx -}}
{{- printf "nats://%s%s-nats-%d.%s-nats-headless.%s.svc:%d" (.userinfo | default "") $fullname (int .i) $fullname .ctx.Release.Namespace (int .ctx.Values.cloud.nats.cluster.port) -}}
{{- end -}}

{{/* The cloud NATS URL of the coordinator and the regional aggregators:
the client Service for one server; every server's own name for a cluster
(a client then fails over between them, docs/federated.md "On a NATS
cluster"). */}}
{{- define "edgesched.cloudNatsURL" -}}
{{- $fullname := include "edgesched.fullname" . -}}
{{- $port := int .Values.cloud.nats.ports.client -}}
{{- $n := int (include "edgesched.natsReplicas" .) -}}
{{- if gt $n 1 -}}
{{- $urls := list -}}
{{- range $i := until $n -}}
{{- $urls = append $urls (printf "nats://%s-nats-%d.%s-nats-headless.%s.svc:%d" $fullname $i $fullname $.Release.Namespace $port) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- printf "nats://%s-nats.%s.svc:%d" $fullname .Release.Namespace $port -}}
{{- end -}}
{{- end -}}

{{/* JetStream replicas of the coordinator's stream, bucket and object
store (--replicas): cloud.coordinator.streamReplicas, 0 meaning the
number of NATS servers up to 3. */}}
{{- define "edgesched.streamReplicas" -}}
{{- $c := .Values.cloud.coordinator -}}
{{- if $c.streamReplicas -}}
{{- int $c.streamReplicas -}}
{{- else -}}
{{- min (int (include "edgesched.natsReplicas" .)) 3 -}}
{{- end -}}
{{- end -}}

{{/* A preference (not a requirement: a small cluster still schedules) to
put the pods of one component on distinct nodes; call with
(dict "ctx" $ "component" "nats"). */}}
{{- define "edgesched.spreadAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "edgesched.selectorLabels" . | nindent 12 }}
{{- end -}}

{{/* The regional aggregators (cloud.regions) with cloud.regionDefaults
filled in, as a JSON list (fromJsonArray). */}}
{{- define "edgesched.regions" -}}
{{- $out := list -}}
{{- range .Values.cloud.regions -}}
{{- $out = append $out (merge (deepCopy .) (deepCopy $.Values.cloud.regionDefaults)) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* Name of a region's site-key ConfigMap; call with (dict "ctx" $ "r" REGION). */}}
{{- define "edgesched.regionSitesConfigMap" -}}
{{- .r.sitesConfigMapName | default (printf "%s-region-%s-sites" (include "edgesched.fullname" .ctx) .r.name) -}}
{{- end -}}

{{/* A region's site names (REGION.sites of the root's --regions
directory): siteNames, else the names of its inline SITE.pub keys. */}}
{{- define "edgesched.regionSiteNames" -}}
{{- $names := .siteNames | default list -}}
{{- if not $names -}}
{{- range $file, $_ := .sites -}}
{{- $names = append $names (trimSuffix ".pub" $file) -}}
{{- end -}}
{{- end -}}
{{- toJson (sortAlpha $names) -}}
{{- end -}}

{{/* Checks of the cloud side (cloud.enabled): the NATS cluster's size,
the coordinator's stream replicas, the regions. */}}
{{- define "edgesched.validateCloud" -}}
{{- $fullname := include "edgesched.fullname" . -}}
{{- $nats := int (include "edgesched.natsReplicas" .) -}}
{{- if not (has $nats (list 1 3 5)) -}}
{{- fail (printf "cloud.nats.cluster.replicas is %d; it must be 1, 3 or 5: JetStream's meta group is a Raft group that needs a majority of the servers to create or change any stream, so an even count tolerates no more lost servers than the odd count below it (2 tolerate none, 4 one) and more than 5 only slows every decision (a stream has at most 5 replicas)" $nats) -}}
{{- end -}}
{{- $r := int (include "edgesched.streamReplicas" .) -}}
{{- if gt $r $nats -}}
{{- fail (printf "cloud.coordinator.streamReplicas is %d but cloud.nats.cluster.replicas is %d: JetStream places each replica on its own server" $r $nats) -}}
{{- end -}}
{{- $regions := include "edgesched.regions" . | fromJsonArray -}}
{{- $seen := dict -}}
{{- $siteRegion := dict -}}
{{- $withKey := 0 -}}
{{- range $regions -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" (.name | default "")) -}}
{{- fail (printf "cloud.regions: name %q must be a DNS label (lowercase letters, digits and '-'; the NATS subjects and object names carry it)" (.name | default "")) -}}
{{- end -}}
{{- if gt (len (printf "%s-region-%s" $fullname .name)) 52 -}}
{{- fail (printf "cloud.regions: %q makes the StatefulSet name %s-region-%s longer than 52 characters (Kubernetes' limit with the pod's revision label): shorten the region or the release name" .name $fullname .name) -}}
{{- end -}}
{{- if hasKey $seen .name -}}
{{- fail (printf "cloud.regions: region %q is listed twice" .name) -}}
{{- end -}}
{{- $_ := set $seen .name true -}}
{{- if not .regionServer -}}
{{- fail (printf "cloud.regions: region %q has no regionServer: the region's NATS server (its leaf-node hub, with JetStream), where its sites send their updates" .name) -}}
{{- end -}}
{{- if .publicKey -}}{{- $withKey = add1 $withKey -}}{{- end -}}
{{- $region := .name -}}
{{- range $file, $_ := .sites -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?\\.pub$" $file) -}}
{{- fail (printf "cloud.regions: region %q: site key %q must be SITE.pub with SITE a DNS label" $region $file) -}}
{{- end -}}
{{- end -}}
{{- range include "edgesched.regionSiteNames" . | fromJsonArray -}}
{{- if eq (get $siteRegion .) $region -}}
{{- fail (printf "cloud.regions: region %q lists site %q twice in siteNames" $region .) -}}
{{- else if hasKey $siteRegion . -}}
{{- fail (printf "cloud.regions: site %q is in regions %q and %q; a site belongs to one region" . (get $siteRegion .) $region) -}}
{{- end -}}
{{- $_ := set $siteRegion . $region -}}
{{- if and $.Values.cloud.coordinator.sites (not (hasKey $.Values.cloud.coordinator.sites (printf "%s.pub" .))) -}}
{{- fail (printf "cloud.regions: site %q of region %q is not in cloud.coordinator.sites: the root registers every site, regional ones too" . $region) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $withKey (ne $withKey (len $regions)) -}}
{{- fail "cloud.regions: set publicKey on every region (the chart writes the root's regions ConfigMap) or on none (you create cloud.regionsConfigMapName)" -}}
{{- end -}}
{{- if $withKey -}}
{{- range $regions -}}
{{- if not (include "edgesched.regionSiteNames" . | fromJsonArray) -}}
{{- fail (printf "cloud.regions: region %q has neither sites nor siteNames: the root's %s.sites list needs its site names" .name .name) -}}
{{- end -}}
{{- end -}}
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
{{- if and .Values.site.enabled .Values.scheduler.enabled -}}
{{- if and (gt (int .Values.scheduler.replicas) 1) (not .Values.scheduler.leaderElect) -}}
{{- fail (printf "scheduler.replicas is %d with scheduler.leaderElect false: replicas above 1 need leader election, or every replica schedules and they bind the same pods against each other (set scheduler.leaderElect=true)" (int .Values.scheduler.replicas)) -}}
{{- end -}}
{{- if eq .Values.scheduler.schedulerName "default-scheduler" -}}
{{- fail "scheduler.schedulerName must not be default-scheduler, the name of K3s's own scheduler (its embedded kube-scheduler): edge-scheduler would place every pod of the cluster in a race with it. Keep edgesched (or another name) and let pods opt in with spec.schedulerName; for every pod, use extender mode (docs/quickstart-k3s.md)" -}}
{{- end -}}
{{- end -}}
{{- if .Values.cloud.enabled -}}
{{- include "edgesched.validateCloud" . -}}
{{- end -}}
{{- if not (or .Values.site.enabled .Values.cloud.enabled) -}}
{{- fail "nothing to install: site.enabled and cloud.enabled are both false" -}}
{{- end -}}
{{- end -}}
