package egress

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"
)

func TestOwnerIsStableBalancedAndMovesOnlyTheKeysOfANodeThatGoes(t *testing.T) {
	nodes := []string{"node-1", "node-2", "node-3", "node-4"}
	var keys []string
	for i := 0; i < 400; i++ {
		keys = append(keys, fmt.Sprintf("172.30.%d.%d", i/250, i%250))
	}
	before := map[string]string{}
	count := map[string]int{}
	for _, k := range keys {
		o := Owner(k, nodes)
		if o2 := Owner(k, []string{"node-4", "node-2", "node-3", "node-1"}); o2 != o {
			t.Fatalf("the owner of %s depends on the candidates' order: %s and %s", k, o, o2)
		}
		before[k] = o
		count[o]++
	}
	for _, n := range nodes {
		// 100 expected each; a hash that ignored the node or the key's
		// last bytes would give 0 or 400.
		if count[n] < 60 || count[n] > 140 {
			t.Errorf("node %s owns %d of %d keys: %v", n, count[n], len(keys), count)
		}
	}
	without := []string{"node-1", "node-3", "node-4"}
	for _, k := range keys {
		o := Owner(k, without)
		if before[k] != "node-2" && o != before[k] {
			t.Errorf("key %s moved from %s to %s when node-2 went", k, before[k], o)
		}
		if o == "node-2" {
			t.Errorf("key %s still owned by the node that went", k)
		}
		if back := Owner(k, nodes); back != before[k] {
			t.Errorf("key %s did not move back to %s when node-2 came back: %s", k, before[k], back)
		}
	}
	if Owner("x", nil) != "" {
		t.Error("no candidate must own nothing")
	}
}

// TestClusterSeesAMemberFailAndAnotherTakeItsKeys runs three members on
// loopback addresses; one stops without leaving (as a killed agent or a
// node that went down does), and the others agree that it is gone.
func TestClusterSeesAMemberFailAndAnotherTakeItsKeys(t *testing.T) {
	changed := make(chan string, 100)
	var cs []*Cluster
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("node-%d", i)
		c, err := NewCluster(ClusterConfig{NodeName: name, BindIP: net.ParseIP("127.0.0.1"), Port: freeUDPAndTCPPort(t),
			Fast: true, OnChange: func() { changed <- name }})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	defer func() {
		for _, c := range cs[:2] {
			c.Leave(time.Second)
		}
	}()
	var addrs []string
	for _, c := range cs {
		addrs = append(addrs, c.ml.LocalNode().Address())
	}
	for _, c := range cs {
		if _, err := c.Join(addrs); err != nil {
			t.Fatal(err)
		}
	}
	all := []string{"node-1", "node-2", "node-3"}
	waitFor(t, 20*time.Second, "every member sees all three alive", func() bool {
		for _, c := range cs {
			if !slices.Equal(c.Alive(), all) {
				return false
			}
		}
		return true
	})
	// The key node-3 owns among all three.
	var key string
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("10.0.0.%d", i); Owner(k, all) == "node-3" {
			key = k
		}
	}
	start := time.Now()
	if err := cs[2].ml.Shutdown(); err != nil { // no Leave: it just stops answering
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the two others see node-3 gone", func() bool {
		return !cs[0].IsAlive("node-3") && !cs[1].IsAlive("node-3")
	})
	t.Logf("node-3's failure seen by both others %v after it stopped (fast probe settings)", time.Since(start).Round(10*time.Millisecond))
	o0, o1 := Owner(key, cs[0].Alive()), Owner(key, cs[1].Alive())
	if o0 != o1 || o0 == "node-3" || o0 == "" {
		t.Errorf("after node-3 failed, node-1 says %s owns %s and node-2 says %s", o0, key, o1)
	}
	select {
	case <-changed:
	default:
		t.Error("OnChange was never called")
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freeUDPAndTCPPort is a port free on 127.0.0.1 for both protocols when
// asked (memberlist binds both).
func freeUDPAndTCPPort(t *testing.T) int {
	t.Helper()
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}
