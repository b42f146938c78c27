package metadata

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

// placeReplicas assigns replicas for nPartitions new partitions, numbered
// from startPartition, on the given brokers (active ones, sorted by id).
// It is Kafka's AdminUtils.assignReplicasToBrokers:
//
//   - Rack-unaware (no broker has a rack): the first replica of partition p
//     goes round-robin to broker (p + startIndex) mod n, so leaders spread
//     evenly; the followers follow it at a shift that grows by one every n
//     partitions, so that the partitions a broker leads do not all put
//     their followers on the same brokers.
//   - Rack-aware: the same over a broker list that alternates racks
//     (a1, b1, c1, a2, b2, ...), skipping a candidate while some rack has
//     no replica of the partition yet or while it already holds one.
//
// startIndex and the initial shift are random (from rng) unless
// fixedStartIndex ≥ 0, which CreatePartitions uses to continue a topic's
// existing layout. A broker without a rack among brokers with racks counts
// as a rack of its own (as KRaft's StripedReplicaPlacer treats it), where
// Kafka's ZooKeeper-era AdminUtils refused the request.
//
// The caller guarantees 1 ≤ rf ≤ len(brokers).
func placeReplicas(brokers []*BrokerRegistration, nPartitions, rf, fixedStartIndex, startPartition int, rng *rand.Rand) [][]int32 {
	hasRack := slices.ContainsFunc(brokers, func(b *BrokerRegistration) bool { return b.Rack != "" })
	if !hasRack {
		ids := make([]int32, len(brokers))
		for i, b := range brokers {
			ids[i] = b.ID
		}
		return placeRackUnaware(ids, nPartitions, rf, fixedStartIndex, startPartition, rng)
	}
	return placeRackAware(brokers, nPartitions, rf, fixedStartIndex, startPartition, rng)
}

func placeRackUnaware(brokers []int32, nPartitions, rf, fixedStartIndex, startPartition int, rng *rand.Rand) [][]int32 {
	n := len(brokers)
	startIndex, shift := startAndShift(n, fixedStartIndex, rng)
	out := make([][]int32, 0, nPartitions)
	p := max(0, startPartition)
	for range nPartitions {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + startIndex) % n
		replicas := make([]int32, 1, rf)
		replicas[0] = brokers[first]
		for j := range rf - 1 {
			replicas = append(replicas, brokers[replicaIndex(first, shift, j, n)])
		}
		out = append(out, replicas)
		p++
	}
	return out
}

func placeRackAware(brokers []*BrokerRegistration, nPartitions, rf, fixedStartIndex, startPartition int, rng *rand.Rand) [][]int32 {
	rackOf := map[int32]string{}
	for _, b := range brokers {
		rackOf[b.ID] = b.Rack
	}
	arranged := rackAlternatedBrokers(brokers)
	n := len(arranged)
	numRacks := len(uniqueRacks(brokers))
	startIndex, shift := startAndShift(n, fixedStartIndex, rng)
	out := make([][]int32, 0, nPartitions)
	p := max(0, startPartition)
	for range nPartitions {
		if p > 0 && p%n == 0 {
			shift++
		}
		first := (p + startIndex) % n
		leader := arranged[first]
		replicas := make([]int32, 1, rf)
		replicas[0] = leader
		racks := map[string]bool{rackOf[leader]: true}
		chosen := map[int32]bool{leader: true}
		k := 0
		for range rf - 1 {
			// Kafka's loop always ends within n-1 candidates; the bound
			// only guards against a bug turning into a hang.
			for tries := 0; tries < 2*n*rf; tries++ {
				b := arranged[replicaIndex(first, shift*numRacks, k, n)]
				k++
				rack := rackOf[b]
				if (!racks[rack] || len(racks) == numRacks) && (!chosen[b] || len(chosen) == n) {
					replicas = append(replicas, b)
					racks[rack], chosen[b] = true, true
					break
				}
			}
		}
		out = append(out, replicas)
		p++
	}
	return out
}

func startAndShift(n, fixedStartIndex int, rng *rand.Rand) (int, int) {
	if fixedStartIndex >= 0 {
		return fixedStartIndex, fixedStartIndex
	}
	return rng.IntN(n), rng.IntN(n)
}

// replicaIndex is Kafka's AdminUtils.replicaIndex: the j-th follower sits
// 1 + (shift + j) mod (n-1) brokers after the first replica, so it is never
// the first replica itself.
func replicaIndex(first, shift, j, n int) int {
	if n <= 1 {
		return first
	}
	return (first + 1 + (shift+j)%(n-1)) % n
}

func uniqueRacks(brokers []*BrokerRegistration) []string {
	var racks []string
	for _, b := range brokers {
		if !slices.Contains(racks, b.Rack) {
			racks = append(racks, b.Rack)
		}
	}
	sort.Strings(racks)
	return racks
}

// rackAlternatedBrokers is Kafka's getRackAlternatedBrokerList: racks in
// name order, brokers of a rack in id order, taken one per rack in turn.
func rackAlternatedBrokers(brokers []*BrokerRegistration) []int32 {
	byRack := map[string][]int32{}
	for _, b := range brokers {
		byRack[b.Rack] = append(byRack[b.Rack], b.ID)
	}
	racks := uniqueRacks(brokers)
	for _, r := range racks {
		slices.Sort(byRack[r])
	}
	out := make([]int32, 0, len(brokers))
	next := make([]int, len(racks))
	for i := 0; len(out) < len(brokers); i = (i + 1) % len(racks) {
		if ids := byRack[racks[i]]; next[i] < len(ids) {
			out = append(out, ids[next[i]])
			next[i]++
		}
	}
	return out
}

// BrokerRack is a broker as AssignReplicas places replicas on it.
type BrokerRack struct {
	ID   int32
	Rack string // "" for none
}

// AssignReplicas proposes replicas for a topic of nPartitions partitions
// with rf replicas each on brokers, as CreateTopics places a new topic's
// (placeReplicas; kafka-reassign-partitions.sh --generate runs the same
// AdminUtils.assignReplicasToBrokers): a random start, leaders spread over
// the brokers, racks alternated when the brokers have them. Partition p's
// replicas are the result's p-th list, its preferred leader first.
func AssignReplicas(brokers []BrokerRack, nPartitions, rf int, rng *rand.Rand) ([][]int32, error) {
	if rf <= 0 {
		return nil, fmt.Errorf("replication factor must be larger than 0")
	}
	if rf > len(brokers) {
		return nil, fmt.Errorf("replication factor: %d larger than available brokers: %d", rf, len(brokers))
	}
	regs := make([]*BrokerRegistration, len(brokers))
	for i, b := range brokers {
		regs[i] = &BrokerRegistration{ID: b.ID, Rack: b.Rack}
	}
	sort.Slice(regs, func(i, j int) bool { return regs[i].ID < regs[j].ID })
	return placeReplicas(regs, nPartitions, rf, -1, 0, rng), nil
}
