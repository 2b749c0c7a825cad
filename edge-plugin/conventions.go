package edgeplugin

import (
	"github.com/edgesched/edgesched/kubefmt"
)

// The Kubernetes conventions EdgePolicy reads and writes live in package
// kubefmt (shared with the edge agent, which must not link this package);
// docs/edge-plugin.md documents each of them. These names keep the
// plugin's API.
const (
	ResourceGPU            = kubefmt.ResourceGPU
	ResourceGPUMilli       = kubefmt.ResourceGPUMilli
	LabelGPUModel          = kubefmt.LabelGPUModel
	LabelZone              = kubefmt.LabelZone
	LabelArch              = kubefmt.LabelArch
	AnnotationGPUMilli     = kubefmt.AnnotationGPUMilli
	AnnotationGPUModels    = kubefmt.AnnotationGPUModels
	AnnotationGPUDevices   = kubefmt.AnnotationGPUDevices
	AnnotationQoS          = kubefmt.AnnotationQoS
	AnnotationCPUUsage     = kubefmt.AnnotationCPUUsage
	AnnotationFailureRate  = kubefmt.AnnotationFailureRate
	AnnotationWattsPerCore = kubefmt.AnnotationWattsPerCore
	AnnotationWattsPerGPU  = kubefmt.AnnotationWattsPerGPU
)
