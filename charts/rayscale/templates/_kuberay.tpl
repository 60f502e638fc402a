{{/*
KubeRay's kuberay-operator chart values (docs/migrating-from-kuberay.md): where one names a rayscale
value differently, the effective value is computed here; what rayscale cannot do is refused here,
saying what to do instead.
*/}}

{{/* KubeRay's own operator image (quay.io/kuberay/operator, or a mirror of that path). */}}
{{- define "rayscale.kuberayImage" -}}
{{- if regexMatch "(^|/)kuberay/operator$" .Values.image.repository -}}true{{- end -}}
{{- end -}}

{{/* The operator image. KubeRay's image (its values file as shipped) becomes rayscale's default
image, `rayscale:<appVersion>` (values.yaml's image.repository; tests/unit/test_chart_kuberay_values.py
checks that the two agree): rayscale's chart cannot run KubeRay's operator. */}}
{{- define "rayscale.image" -}}
{{- if include "rayscale.kuberayImage" . -}}
{{- printf "rayscale:%s" .Chart.AppVersion -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* Maps merged key by key, as JSON; a key that two of them set differently is refused. The context
is a list of [value name, map] pairs. */}}
{{- define "rayscale.mergeMaps" -}}
{{- $merged := dict -}}
{{- $from := dict -}}
{{- range . -}}
{{- $name := index . 0 -}}
{{- range $key, $value := index . 1 | default dict -}}
{{- if and (hasKey $merged $key) (ne (toString (get $merged $key)) (toString $value)) -}}
{{- fail (printf "%s and %s set %s differently (%q and %q): set it in one of them" (get $from $key) $name $key (toString (get $merged $key)) (toString $value)) -}}
{{- end -}}
{{- $_ := set $merged $key $value -}}
{{- $_ := set $from $key $name -}}
{{- end -}}
{{- end -}}
{{- $merged | toJson -}}
{{- end -}}

{{/* The operator pod's extra labels: podLabels, KubeRay's labels and componentOverride. */}}
{{- define "rayscale.podLabels" -}}
{{- $component := dict -}}
{{- with .Values.componentOverride -}}{{- $component = dict "app.kubernetes.io/component" . -}}{{- end -}}
{{- include "rayscale.mergeMaps" (list (list "podLabels" .Values.podLabels) (list "labels" .Values.labels) (list "componentOverride" $component)) -}}
{{- end -}}

{{/* The operator pod's annotations: podAnnotations and KubeRay's annotations. */}}
{{- define "rayscale.podAnnotations" -}}
{{- include "rayscale.mergeMaps" (list (list "podAnnotations" .Values.podAnnotations) (list "annotations" .Values.annotations)) -}}
{{- end -}}

{{/* The ServiceMonitor's extra labels: labels, and KubeRay's selector (v1.6) and additionalLabels. */}}
{{- define "rayscale.serviceMonitorLabels" -}}
{{- with .Values.metrics.serviceMonitor -}}
{{- include "rayscale.mergeMaps" (list (list "metrics.serviceMonitor.labels" .labels) (list "metrics.serviceMonitor.selector" .selector) (list "metrics.serviceMonitor.additionalLabels" .additionalLabels)) -}}
{{- end -}}
{{- end -}}

{{/* A field of the metrics Service, from metrics.service or KubeRay's service. The context is a dict:
root, key (`type` or `port`) and default (values.yaml's metrics.service.<key>). KubeRay's value,
unless it is that default too (as in KubeRay's own values file), is used unless
metrics.service.<key> is set to something else: that is refused. */}}
{{- define "rayscale.metricsService" -}}
{{- $ours := get .root.Values.metrics.service .key -}}
{{- $kuberay := .root.Values.service | default dict -}}
{{- if or (not (hasKey $kuberay .key)) (eq (toString (get $kuberay .key)) (toString .default)) -}}
{{- $ours -}}
{{- else if or (eq (toString $ours) (toString .default)) (eq (toString $ours) (toString (get $kuberay .key))) -}}
{{- get $kuberay .key -}}
{{- else -}}
{{- fail (printf "service.%s (KubeRay's name for metrics.service.%s) is %v but metrics.service.%s is %v: set only one" .key .key (get $kuberay .key) .key $ours) -}}
{{- end -}}
{{- end -}}

{{/* What each of KubeRay v1.6.2's feature gates must be under rayscale ("any": either) and why. */}}
{{- define "rayscale.featureGates" -}}
RayClusterStatusConditions: [true, "rayscale always writes RayCluster status conditions"]
RayMultiHostIndexing: [true, "rayscale always labels the pods of multi-host worker replicas"]
RayJobDeletionPolicy: [any, "rayscale always honours a RayJob's deletionStrategy"]
RayServiceIncrementalUpgrade: [false, "rayscale does not run RayServices"]
RayCronJob: [any, "rayscale always runs RayCronJobs"]
AsyncJobInfoQuery: [any, "rayscale reads job status from Ray's GCS and never waits on the dashboard"]
{{- end -}}

{{/* The batch schedulers rayscale integrates, by KubeRay's names (rayscale run --batch-scheduler). */}}
{{- define "rayscale.batchSchedulers" -}}volcano yunikorn scheduler-plugins kai-scheduler{{- end -}}

{{/* The operator's batch scheduler (rayscale run --batch-scheduler): batchScheduler.name, or
volcano for KubeRay's deprecated batchScheduler.enabled; empty for none. */}}
{{- define "rayscale.batchScheduler" -}}
{{- with .Values.batchScheduler -}}
{{- if .enabled -}}volcano{{- else -}}{{- .name | default "" -}}{{- end -}}
{{- end -}}
{{- end -}}

{{/* KubeRay's values that would change what the operator does, in a way rayscale cannot: refused. */}}
{{- define "rayscale.refuseKuberayValues" -}}
{{- $values := .Values -}}
{{- with $values.batchScheduler -}}
{{- if and .enabled .name -}}
{{- fail (printf "batchScheduler: enabled (KubeRay's deprecated form of name: volcano) and name %q are both set, which KubeRay's operator refuses too; set name only" .name) -}}
{{- end -}}
{{- if and .name (not (has .name (include "rayscale.batchSchedulers" $ | splitList " "))) -}}
{{- fail (printf "batchScheduler.name %q: rayscale does not integrate this scheduler; use one of %s (KubeRay's names), or \"\"" .name (include "rayscale.batchSchedulers" $ | splitList " " | join ", ")) -}}
{{- end -}}
{{- end -}}
{{- $configuration := $values.configuration | default dict -}}
{{- if $configuration.enabled -}}
{{- $what := dict "defaultContainerEnvs" "environment variables to every Ray container: set them in the RayClusters' container env" "defaultPodAnnotations" "annotations to every Ray pod: set them in the RayClusters' pod templates" "defaultPodLabels" "labels to every Ray pod: set them in the RayClusters' pod templates" "headSidecarContainers" "sidecars to Ray head pods: add them to the RayClusters' headGroupSpec template" "workerSidecarContainers" "sidecars to Ray worker pods: add them to the RayClusters' workerGroupSpecs templates" -}}
{{- range $key := keys $what | sortAlpha -}}
{{- if get $configuration $key -}}
{{- fail (printf "configuration.%s: rayscale does not add %s, and remove configuration.%s" $key (get $what $key) $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $values.logging -}}
{{- if and .baseDir .fileName -}}
{{- fail "logging.baseDir and logging.fileName: rayscale logs to stdout only, to no file; remove them" -}}
{{- end -}}
{{- end -}}
{{- if and $values.operatorCommand (ne $values.operatorCommand "/manager") -}}
{{- fail (printf "operatorCommand %q: rayscale's chart runs rayscale's image as built; remove operatorCommand" $values.operatorCommand) -}}
{{- end -}}
{{- if $values.useKubernetesProxy -}}
{{- fail "useKubernetesProxy: rayscale dials Ray heads directly and cannot go through the API server's proxy; remove it or set it to false" -}}
{{- end -}}
{{- $gates := include "rayscale.featureGates" . | fromYaml -}}
{{- range $values.featureGates -}}
{{- if not (hasKey $gates .name) -}}
{{- fail (printf "featureGates: rayscale has no feature gate %s (nor KubeRay v1.6.2); remove it" .name) -}}
{{- end -}}
{{- $gate := get $gates .name -}}
{{- if and (ne (toString (index $gate 0)) "any") (ne (index $gate 0) .enabled) -}}
{{- fail (printf "featureGates: %s enabled: %t: %s; remove it or set enabled: %t" .name .enabled (index $gate 1) (index $gate 0)) -}}
{{- end -}}
{{- end -}}
{{- range $values.env -}}
{{- if eq (toString .name) "RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV" -}}
{{- fail (printf "env RAYCLUSTER_DEFAULT_REQUEUE_SECONDS_ENV: rayscale's equivalent is resyncSeconds; remove the entry and set resyncSeconds: %v" (.value | default "<seconds>")) -}}
{{- else if and (eq (toString .name) "USE_INGRESS_ON_OPENSHIFT") (ne (lower (toString .value)) "true") -}}
{{- fail "env USE_INGRESS_ON_OPENSHIFT: rayscale creates an Ingress for enableIngress also on OpenShift, never a Route (KubeRay's \"true\"); set it to \"true\" or remove the entry" -}}
{{- end -}}
{{- end -}}
{{- if $values.singleNamespaceInstall -}}
{{- range $values.watchNamespace -}}
{{- if regexMatch "[*?!,]" . -}}
{{- fail (printf "singleNamespaceInstall: the watchNamespace pattern %q needs a ClusterRole; name the namespaces, or set singleNamespaceInstall: false" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
