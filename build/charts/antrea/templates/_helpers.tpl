{{/*
Helpers of the antrea chart. "antrea.validate" is included by the ConfigMap
(rendered with every object), so a bad value fails every rendering, `helm
template` as well as `helm install`, with a message naming the value, in the
words antrea-agent would use for the same mistake in its conf file.
*/}}

{{/*
The feature gates each component implements, with their defaults (those of
pkg/config/agent and pkg/config/controller); values.schema.json lists them too.
*/}}
{{- define "antrea.agentFeatureGates" -}}
AntreaProxy: true
FlowExporter: false
PacketCapture: false
NodeLatencyMonitor: false
NodeNetworkPolicy: false
BGPPolicy: false
Egress: true
ServiceExternalIP: true
EgressTrafficShaping: false
NodePortLocal: true
SupportBundleCollection: false
TrafficControl: false
L7NetworkPolicy: false
{{- end -}}

{{- define "antrea.controllerFeatureGates" -}}
Egress: true
ServiceExternalIP: false
SupportBundleCollection: false
L7NetworkPolicy: false
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
{{- if not (has $v.trafficEncapMode (list "encap" "noEncap" "hybrid")) -}}
{{- fail (printf "trafficEncapMode: %q is not supported by this Antrea (want encap, noEncap or hybrid)" (toString $v.trafficEncapMode)) -}}
{{- end -}}
{{- if not (has $v.tunnelType (list "geneve" "vxlan" "gre")) -}}
{{- fail (printf "tunnelType: %q is not supported (want geneve, vxlan or gre)" (toString $v.tunnelType)) -}}
{{- end -}}
{{- if not (has $v.ovs.datapathType (list "system" "netdev")) -}}
{{- fail (printf "ovs.datapathType: %q is not supported (want system or netdev)" (toString $v.ovs.datapathType)) -}}
{{- end -}}
{{- if not (and (include "antrea.isCount" $v.defaultMTU) (or (eq (float64 $v.defaultMTU) 0.0) (and (ge (float64 $v.defaultMTU) 68.0) (le (float64 $v.defaultMTU) 65535.0)))) -}}
{{- fail (printf "defaultMTU: %v is out of range (want 0 for automatic, or 68 to 65535)" $v.defaultMTU) -}}
{{- end -}}
{{- range $v.antreaProxy.nodePortAddresses -}}
{{- if not (regexMatch "^[0-9]{1,3}(\\.[0-9]{1,3}){3}/[0-9]{1,2}$" (toString .)) -}}
{{- fail (printf "antreaProxy.nodePortAddresses: %q is not an IPv4 CIDR (e.g. 192.168.77.0/24)" (toString .)) -}}
{{- end -}}
{{- end -}}
{{- range $k := list "flowPollInterval" "activeFlowExportTimeout" "idleFlowExportTimeout" -}}
{{- if not (regexMatch "^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$" (toString (get $v.flowExporter $k))) -}}
{{- fail (printf "flowExporter.%s: %q is not a Go duration (e.g. 5s)" $k (toString (get $v.flowExporter $k))) -}}
{{- end -}}
{{- end -}}
{{- if regexMatch ":[a-zA-Z][a-zA-Z0-9]*$" (toString $v.flowExporter.flowCollectorAddr) -}}
{{- if not (regexMatch ":(tcp|udp|tls|grpc)$" (toString $v.flowExporter.flowCollectorAddr)) -}}
{{- fail (printf "flowExporter.flowCollectorAddr: %q: the transport is not one of tcp, udp, tls, grpc" (toString $v.flowExporter.flowCollectorAddr)) -}}
{{- end -}}
{{- end -}}
{{- if $v.antreaProxy.skipServices -}}
{{- fail (printf "antreaProxy.skipServices: %v is not supported by this Antrea (only an empty list)" $v.antreaProxy.skipServices) -}}
{{- end -}}
{{- if not (has $v.tlsMinVersion (list "" "VersionTLS10" "VersionTLS11" "VersionTLS12" "VersionTLS13")) -}}
{{- fail (printf "tlsMinVersion: %q is not a TLS version (want VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13)" (toString $v.tlsMinVersion)) -}}
{{- end -}}
{{- if not (include "antrea.isCount" $v.logVerbosity) -}}
{{- fail (printf "logVerbosity: %v is not a non-negative integer" $v.logVerbosity) -}}
{{- end -}}
{{- $known := merge (include "antrea.agentFeatureGates" . | fromYaml) (include "antrea.controllerFeatureGates" . | fromYaml) -}}
{{- range $name, $enabled := $v.featureGates -}}
{{- if not (hasKey $known $name) -}}
{{- fail (printf "featureGates: %q is not a feature gate this Antrea implements (implemented: %s)" $name (keys $known | sortAlpha | join ", ")) -}}
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

{{- define "antrea.uiImage" -}}
{{- $tag := include "antrea.imageTag" (dict "tag" .Values.uiImage.tag "appVersion" .Chart.AppVersion) -}}
{{- printf "%s:%s" .Values.uiImage.repository $tag -}}
{{- end -}}

{{/* The checksum of the ConfigMap: a change of the conf files rolls the Pods. */}}
{{- define "antrea.configChecksum" -}}
{{- include (print .Template.BasePath "/configmap.yaml") . | sha256sum -}}
{{- end -}}
