package interfacestore

import (
	"net"
	"slices"
	"strings"
	"sync"
)

// store implements InterfaceStore with a map by name and secondary indexes
// kept in step under one lock; lookups are O(1) because the CNI server and the
// packet-in handlers ask on every pod event and packet.
type store struct {
	mu          sync.RWMutex
	byName      map[string]*InterfaceConfig
	byContainer map[string][]string // container ID -> interface names
	byPod       map[string][]string // namespace/name -> interface names
	byIP        map[string]string   // IP string -> interface name
	byOFPort    map[int32]string    // OpenFlow port -> interface name
}

var _ InterfaceStore = (*store)(nil)

// NewInterfaceStore returns an empty, thread-safe InterfaceStore.
func NewInterfaceStore() InterfaceStore {
	s := &store{}
	s.reset()
	return s
}

func (s *store) reset() {
	s.byName = map[string]*InterfaceConfig{}
	s.byContainer = map[string][]string{}
	s.byPod = map[string][]string{}
	s.byIP = map[string]string{}
	s.byOFPort = map[int32]string{}
}

func podKey(name, namespace string) string { return namespace + "/" + name }

// Initialize replaces the content with interfaces.
func (s *store) Initialize(interfaces []*InterfaceConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reset()
	for _, cfg := range interfaces {
		s.add(cfg.DeepCopy())
	}
}

// AddInterface adds cfg, replacing any interface of the same name.
func (s *store) AddInterface(cfg *InterfaceConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.add(cfg.DeepCopy())
}

// DeleteInterface removes the interface named cfg.InterfaceName.
func (s *store) DeleteInterface(cfg *InterfaceConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(cfg.InterfaceName)
}

// add indexes cfg (owned by the store); the caller holds the write lock.
func (s *store) add(cfg *InterfaceConfig) {
	s.remove(cfg.InterfaceName)
	name := cfg.InterfaceName
	s.byName[name] = cfg
	if c := cfg.ContainerInterfaceConfig; c != nil {
		s.byContainer[c.ContainerID] = append(s.byContainer[c.ContainerID], name)
		k := podKey(c.PodName, c.PodNamespace)
		s.byPod[k] = append(s.byPod[k], name)
	}
	for _, ip := range cfg.IPs {
		s.byIP[ip.String()] = name
	}
	if p := cfg.OVSPortConfig; p != nil && p.OFPort > 0 {
		s.byOFPort[p.OFPort] = name
	}
}

// remove drops name from every index; the caller holds the write lock.
func (s *store) remove(name string) {
	cfg, ok := s.byName[name]
	if !ok {
		return
	}
	delete(s.byName, name)
	dropName := func(m map[string][]string, k string) {
		names := slices.DeleteFunc(m[k], func(n string) bool { return n == name })
		if len(names) == 0 {
			delete(m, k)
		} else {
			m[k] = names
		}
	}
	if c := cfg.ContainerInterfaceConfig; c != nil {
		dropName(s.byContainer, c.ContainerID)
		dropName(s.byPod, podKey(c.PodName, c.PodNamespace))
	}
	for _, ip := range cfg.IPs {
		if s.byIP[ip.String()] == name {
			delete(s.byIP, ip.String())
		}
	}
	if p := cfg.OVSPortConfig; p != nil && s.byOFPort[p.OFPort] == name {
		delete(s.byOFPort, p.OFPort)
	}
}

// get returns a copy of the interface named name; the caller holds a lock.
func (s *store) get(name string) (*InterfaceConfig, bool) {
	cfg, ok := s.byName[name]
	if !ok {
		return nil, false
	}
	return cfg.DeepCopy(), true
}

// getAll returns copies of the named interfaces, sorted by name.
func (s *store) getAll(names []string) []*InterfaceConfig {
	out := make([]*InterfaceConfig, 0, len(names))
	for _, n := range names {
		if cfg, ok := s.get(n); ok {
			out = append(out, cfg)
		}
	}
	slices.SortFunc(out, func(a, b *InterfaceConfig) int { return strings.Compare(a.InterfaceName, b.InterfaceName) })
	return out
}

// GetInterfaceByName returns the interface named name.
func (s *store) GetInterfaceByName(name string) (*InterfaceConfig, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.get(name)
}

// GetContainerInterface returns the first (by name) interface of a container.
func (s *store) GetContainerInterface(containerID string) (*InterfaceConfig, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	all := s.getAll(s.byContainer[containerID])
	if len(all) == 0 {
		return nil, false
	}
	return all[0], true
}

// GetContainerInterfacesByPod returns the interfaces of pod namespace/name.
func (s *store) GetContainerInterfacesByPod(podName, podNamespace string) []*InterfaceConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.getAll(s.byPod[podKey(podName, podNamespace)])
}

// GetInterfaceByIP returns the interface holding ip (any textual form).
func (s *store) GetInterfaceByIP(ip string) (*InterfaceConfig, bool) {
	key := ip
	if parsed := net.ParseIP(ip); parsed != nil {
		key = parsed.String()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	name, ok := s.byIP[key]
	if !ok {
		return nil, false
	}
	return s.get(name)
}

// GetInterfaceByOFPort returns the interface on OpenFlow port ofPort.
func (s *store) GetInterfaceByOFPort(ofPort int32) (*InterfaceConfig, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	name, ok := s.byOFPort[ofPort]
	if !ok {
		return nil, false
	}
	return s.get(name)
}

// GetInterfacesByType returns the interfaces of type t, sorted by name.
func (s *store) GetInterfacesByType(t InterfaceType) []*InterfaceConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var names []string
	for n, cfg := range s.byName {
		if cfg.Type == t {
			names = append(names, n)
		}
	}
	return s.getAll(names)
}

// GetContainerInterfaceNum returns how many pod interfaces are stored.
func (s *store) GetContainerInterfaceNum() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := 0
	for _, cfg := range s.byName {
		if cfg.Type == ContainerInterface {
			n++
		}
	}
	return n
}

// Len returns how many interfaces are stored.
func (s *store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byName)
}

// ListInterfaces returns every interface, sorted by name.
func (s *store) ListInterfaces() []*InterfaceConfig {
	s.mu.RLock()
	defer s.mu.RUnlock()
	names := make([]string, 0, len(s.byName))
	for n := range s.byName {
		names = append(names, n)
	}
	return s.getAll(names)
}
