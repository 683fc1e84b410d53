package admission

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	crdv1alpha1 "antrea.io/antrea/pkg/apis/crd/v1alpha1"
)

// sftpURL is what spec.fileServer.url must look like (upstream's schema
// pattern: sftp://host:port[/path]).
var sftpURL = regexp.MustCompile(`^sftp://[\w\-._/\[\]:]+:\d+`)

// ValidatePacketCapture refuses what upstream's PacketCapture schema and
// agent refuse: no source nor destination, no Pod at either end, a Pod and
// an IP at one end, an IP that is not one (or not of spec.packet.ipFamily),
// no captureConfig.firstN or a number below 1, a timeout outside 1..300,
// a file server URL that is not sftp://host:port, an unknown protocol, a
// transport header of another protocol than spec.packet.protocol, ports
// outside 1..65535, TCP flags outside 0..255, an unknown ICMP type, an
// unknown direction or capture point, and a capture point without its Pod.
func (v *Validator) ValidatePacketCapture(_ context.Context, pc *crdv1alpha1.PacketCapture) field.ErrorList {
	spec := field.NewPath("spec")
	s := pc.Spec
	var errs field.ErrorList
	fam := corev1.IPv4Protocol
	if s.Packet != nil && s.Packet.IPFamily != "" {
		fam = s.Packet.IPFamily
	}
	endpoint := func(p *field.Path, pod *crdv1alpha1.PodReference, ip *string) {
		if pod != nil && ip != nil {
			errs = append(errs, field.Invalid(p, "pod and ip", "pod and ip are mutually exclusive"))
		}
		if pod != nil && pod.Name == "" {
			errs = append(errs, field.Required(p.Child("pod", "name"), "the Pod's name"))
		}
		if ip != nil {
			a, err := netip.ParseAddr(*ip)
			switch {
			case err != nil:
				errs = append(errs, field.Invalid(p.Child("ip"), *ip, "not an IP address"))
			case a.Unmap().Is4() != (fam == corev1.IPv4Protocol):
				errs = append(errs, field.Invalid(p.Child("ip"), *ip, fmt.Sprintf("not an %s address (spec.packet.ipFamily)", fam)))
			}
		}
	}
	endpoint(spec.Child("source"), s.Source.Pod, s.Source.IP)
	endpoint(spec.Child("destination"), s.Destination.Pod, s.Destination.IP)
	srcSet := s.Source.Pod != nil || s.Source.IP != nil
	dstSet := s.Destination.Pod != nil || s.Destination.IP != nil
	switch {
	case !srcSet && !dstSet:
		errs = append(errs, field.Required(spec, "at least one of source and destination"))
	case s.Source.Pod == nil && s.Destination.Pod == nil:
		errs = append(errs, field.Required(spec, "at least one of source.pod and destination.pod: the capture runs on a Pod's Node"))
	}
	if fn := s.CaptureConfig.FirstN; fn == nil {
		errs = append(errs, field.Required(spec.Child("captureConfig", "firstN"), "the number of packets to capture"))
	} else if fn.Number < 1 {
		errs = append(errs, field.Invalid(spec.Child("captureConfig", "firstN", "number"), fn.Number, "must be at least 1"))
	}
	if s.Timeout != nil && (*s.Timeout < 1 || *s.Timeout > 300) {
		errs = append(errs, field.Invalid(spec.Child("timeout"), *s.Timeout, "must be 1 to 300 (seconds)"))
	}
	if fs := s.FileServer; fs != nil && !sftpURL.MatchString(fs.URL) {
		errs = append(errs, field.Invalid(spec.Child("fileServer", "url"), fs.URL, "must be sftp://host:port[/path]"))
	}
	switch s.Direction {
	case "", crdv1alpha1.CaptureDirectionSourceToDestination, crdv1alpha1.CaptureDirectionDestinationToSource, crdv1alpha1.CaptureDirectionBoth:
	default:
		errs = append(errs, field.NotSupported(spec.Child("direction"), s.Direction, []string{"SourceToDestination", "DestinationToSource", "Both"}))
	}
	switch s.CapturePoint {
	case "":
	case crdv1alpha1.CapturePointSource:
		if s.Source.Pod == nil {
			errs = append(errs, field.Invalid(spec.Child("capturePoint"), s.CapturePoint, "needs spec.source.pod"))
		}
	case crdv1alpha1.CapturePointDestination:
		if s.Destination.Pod == nil {
			errs = append(errs, field.Invalid(spec.Child("capturePoint"), s.CapturePoint, "needs spec.destination.pod"))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("capturePoint"), s.CapturePoint, []string{"Source", "Destination"}))
	}
	if s.Packet != nil {
		errs = append(errs, validateCapturePacket(spec.Child("packet"), s.Packet)...)
	}
	return errs
}

func validateCapturePacket(p *field.Path, pkt *crdv1alpha1.Packet) field.ErrorList {
	var errs field.ErrorList
	switch pkt.IPFamily {
	case "", corev1.IPv4Protocol, corev1.IPv6Protocol:
	default:
		errs = append(errs, field.NotSupported(p.Child("ipFamily"), pkt.IPFamily, []string{"IPv4", "IPv6"}))
	}
	proto, err := crdv1alpha1.ProtocolNumber(pkt.Protocol)
	if err != nil {
		errs = append(errs, field.Invalid(p.Child("protocol"), pkt.Protocol.String(), err.Error()))
	}
	th, thp := pkt.TransportHeader, p.Child("transportHeader")
	needs := func(header string, want uint8, name string) {
		if err == nil && proto != 0 && proto != want {
			errs = append(errs, field.Invalid(thp.Child(header), header, "needs spec.packet.protocol "+name))
		}
	}
	ports := func(hp *field.Path, src, dst *int32) {
		for _, x := range []struct {
			name string
			v    *int32
		}{{"srcPort", src}, {"dstPort", dst}} {
			if x.v != nil && (*x.v < 1 || *x.v > 65535) {
				errs = append(errs, field.Invalid(hp.Child(x.name), *x.v, "must be 1 to 65535"))
			}
		}
	}
	if th.TCP != nil {
		needs("tcp", 6, "TCP")
		ports(thp.Child("tcp"), th.TCP.SrcPort, th.TCP.DstPort)
		for i, f := range th.TCP.Flags {
			fp := thp.Child("tcp", "flags").Index(i)
			if f.Value < 0 || f.Value > 255 {
				errs = append(errs, field.Invalid(fp.Child("value"), f.Value, "must be 0 to 255"))
			}
			if f.Mask != nil && (*f.Mask < 0 || *f.Mask > 255) {
				errs = append(errs, field.Invalid(fp.Child("mask"), *f.Mask, "must be 0 to 255"))
			}
		}
	}
	if th.UDP != nil {
		needs("udp", 17, "UDP")
		ports(thp.Child("udp"), th.UDP.SrcPort, th.UDP.DstPort)
	}
	if th.ICMP != nil {
		needs("icmp", 1, "ICMP")
		for i, m := range th.ICMP.Messages {
			mp := thp.Child("icmp", "messages").Index(i)
			if _, err := crdv1alpha1.ICMPTypeNumber(m.Type); err != nil {
				errs = append(errs, field.Invalid(mp.Child("type"), m.Type.String(), err.Error()))
			}
			if m.Code != nil && (*m.Code < 0 || *m.Code > 255) {
				errs = append(errs, field.Invalid(mp.Child("code"), *m.Code, "must be 0 to 255"))
			}
		}
	}
	return errs
}
