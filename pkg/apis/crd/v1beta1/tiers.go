package v1beta1

import "strings"

// The static Tiers antrea-controller creates at start (upstream's names and
// priorities, docs/antrea-network-policy.md "Static tiers"). K8s
// NetworkPolicies are evaluated after the application Tier and before the
// baseline Tier.
const (
	EmergencyTierName   = "emergency"
	SecurityOpsTierName = "securityops"
	NetworkOpsTierName  = "networkops"
	PlatformTierName    = "platform"
	// DefaultTierName is the Tier of a policy whose tier is empty.
	DefaultTierName = "application"
	// BaselineTierName is the Tier evaluated after K8s NetworkPolicies.
	BaselineTierName = "baseline"

	// DefaultTierPriority is the priority of the application Tier, the last
	// evaluated before K8s NetworkPolicies.
	DefaultTierPriority int32 = 250
	// BaselineTierPriority is the priority of the baseline Tier.
	BaselineTierPriority int32 = 253
	// MaxSupportedTiers is the number of Tiers (static ones included) a
	// cluster may hold, as upstream.
	MaxSupportedTiers = 20
)

// StaticTiers are the Tiers antrea-controller creates and keeps, in
// priority order. A user cannot delete them or change their spec.
var StaticTiers = []TierSpecNamed{
	{EmergencyTierName, TierSpec{Priority: 50, Description: "[READ-ONLY]: System generated Emergency Tier"}},
	{SecurityOpsTierName, TierSpec{Priority: 100, Description: "[READ-ONLY]: System generated SecurityOps Tier"}},
	{NetworkOpsTierName, TierSpec{Priority: 150, Description: "[READ-ONLY]: System generated NetworkOps Tier"}},
	{PlatformTierName, TierSpec{Priority: 200, Description: "[READ-ONLY]: System generated Platform Tier"}},
	{DefaultTierName, TierSpec{Priority: DefaultTierPriority, Description: "[READ-ONLY]: System generated default Application Tier"}},
	{BaselineTierName, TierSpec{Priority: BaselineTierPriority, Description: "[READ-ONLY]: System generated Baseline Tier"}},
}

// TierSpecNamed is a Tier's name with its spec.
type TierSpecNamed struct {
	Name string
	Spec TierSpec
}

// IsStaticTier reports whether name is one of StaticTiers.
func IsStaticTier(name string) bool {
	for _, t := range StaticTiers {
		if t.Name == name {
			return true
		}
	}
	return false
}

// IsReservedTierPriority reports whether a custom Tier may not take p:
// 250 to 255 are kept for the application and baseline Tiers and around
// them (upstream reserves 251, 252, 254 and 255; 250 and 253 are taken).
func IsReservedTierPriority(p int32) bool {
	return p >= DefaultTierPriority && p <= 255
}

// TierName is the name of the Tier a policy's tier field refers to: empty
// is the application Tier, and the CamelCase names of Antrea 0.9's static
// tiers (SecurityOps, ...) are the static Tiers, as upstream reads them.
func TierName(tier string) string {
	if tier == "" {
		return DefaultTierName
	}
	if lower := strings.ToLower(tier); lower != tier && IsStaticTier(lower) {
		return lower
	}
	return tier
}
