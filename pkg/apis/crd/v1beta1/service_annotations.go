package v1beta1

// ServiceExternalIPPoolAnnotationKey is the annotation of a Service of type
// LoadBalancer naming the ExternalIPPool its ingress IP comes from
// (upstream's, docs/service-loadbalancer.md). antrea-controller allocates
// the IP and writes it into status.loadBalancer.ingress; the agents announce
// the Services' ingress IPs whose Service carries it.
const ServiceExternalIPPoolAnnotationKey = "service.antrea.io/external-ip-pool"
