{{/*
Helpers of the antrea chart. "antrea.validate" is included by the ConfigMap
(rendered with every object), so a bad value fails every rendering, `helm
template` as well as `helm install`, with a message naming the value, in the
words antrea-agent would use for the same mistake in its conf file.
*/}}

{{/* The feature gates each component knows, with their defaults. */}}
{{- define "antrea.agentFeatureGates" -}}
AntreaProxy: true
{{- end -}}

{{- define "antrea.controllerFeatureGates" -}}
{}
{{- end -}}

{{/*
antrea.featureGates renders the featureGates map of a conf file: a gate set in
.Values.featureGates is written, every other known gate appears commented out
with its default. Arguments: "gates" (the known gates, name: default) and
"values" (.Values.featureGates).
*/}}
{{- define "antrea.featureGates" -}}
{{- $set := dict -}}
{{- range $name, $default := .gates -}}
{{- if hasKey $.values $name -}}
{{- $_ := set $set $name (get $.values $name) -}}
{{- end -}}
{{- end -}}
{{- if $set -}}
featureGates:
{{- range $name, $enabled := $set }}
  {{ $name }}: {{ $enabled }}
{{- end }}
{{- else -}}
featureGates: {}
{{- end }}
{{- range $name, $default := .gates }}
{{- if not (hasKey $.values $name) }}
#  {{ $name }}: {{ $default }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
antrea.isCount renders "true" for a non-negative integer: a number from
values.yaml (float64) or from --set (int64) without a fraction.
*/}}
{{- define "antrea.isCount" -}}
{{- if or (kindIs "float64" .) (kindIs "int64" .) (kindIs "int" .) -}}
{{- if and (ge (float64 .) 0.0) (eq (float64 .) (floor .)) -}}true{{- end -}}
{{- end -}}
{{- end -}}

{{/* antrea.validate fails on a value the components do not support. */}}
{{- define "antrea.validate" -}}
{{- $v := .Values -}}
{{- if not (has $v.trafficEncapMode (list "encap")) -}}
{{- fail (printf "trafficEncapMode: %q is not supported (want encap)" (toString $v.trafficEncapMode)) -}}
{{- end -}}
{{- if not (has $v.tunnelType (list "geneve" "vxlan")) -}}
{{- fail (printf "tunnelType: %q is not supported (want geneve or vxlan)" (toString $v.tunnelType)) -}}
{{- end -}}
{{- if not (has $v.ovs.datapathType (list "system" "netdev")) -}}
{{- fail (printf "ovs.datapathType: %q is not supported (want system or netdev)" (toString $v.ovs.datapathType)) -}}
{{- end -}}
{{- if and $v.kubeAPIServerOverride (not (regexMatch "^https://[^/]+$" (toString $v.kubeAPIServerOverride))) -}}
{{- fail (printf "kubeAPIServerOverride: %q is not an address of the form https://host:port" (toString $v.kubeAPIServerOverride)) -}}
{{- end -}}
{{- if not (include "antrea.isCount" $v.defaultMTU) -}}
{{- fail (printf "defaultMTU: %v is not a number of bytes (0 means automatic)" $v.defaultMTU) -}}
{{- end -}}
{{- if not (include "antrea.isCount" $v.logVerbosity) -}}
{{- fail (printf "logVerbosity: %v is not a non-negative integer" $v.logVerbosity) -}}
{{- end -}}
{{- $known := merge (include "antrea.agentFeatureGates" . | fromYaml) (include "antrea.controllerFeatureGates" . | fromYaml) -}}
{{- range $name, $enabled := $v.featureGates -}}
{{- if not (hasKey $known $name) -}}
{{- fail (printf "featureGates: unknown feature gate %q (known: %s)" $name (keys $known | sortAlpha | join ", ")) -}}
{{- end -}}
{{- if not (kindIs "bool" $enabled) -}}
{{- fail (printf "featureGates: %s: %v is not a boolean" $name $enabled) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The images, their tag defaulting to the chart's appVersion. */}}
{{- define "antrea.imageTag" -}}
{{- if .tag -}}
{{- .tag -}}
{{- else if eq .appVersion "latest" -}}
latest
{{- else -}}
{{- printf "v%s" .appVersion -}}
{{- end -}}
{{- end -}}

{{- define "antrea.agentImage" -}}
{{- $tag := include "antrea.imageTag" (dict "tag" .Values.agentImage.tag "appVersion" .Chart.AppVersion) -}}
{{- printf "%s:%s" .Values.agentImage.repository $tag -}}
{{- end -}}

{{- define "antrea.controllerImage" -}}
{{- $tag := include "antrea.imageTag" (dict "tag" .Values.controllerImage.tag "appVersion" .Chart.AppVersion) -}}
{{- printf "%s:%s" .Values.controllerImage.repository $tag -}}
{{- end -}}

{{/* The checksum of the ConfigMap: a change of the conf files rolls the Pods. */}}
{{- define "antrea.configChecksum" -}}
{{- include (print .Template.BasePath "/configmap.yaml") . | sha256sum -}}
{{- end -}}
