package record

// Murmur2 is Kafka's murmur2 exactly as
// org.apache.kafka.common.utils.Utils.murmur2 computes it (seed 0x9747b28c):
// the hash behind the Java producer's default partitioner, so a key placed by
// a Keel client lands on the same partition as one placed by a Java client.
//
// It is safe for concurrent use and does not allocate.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	// Java works on signed ints with unsigned shifts (>>>); uint32
	// arithmetic gives the same bits.
	h := seed ^ uint32(len(data))
	for len(data) >= 4 {
		k := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
		data = data[4:]
	}
	switch len(data) {
	case 3:
		h ^= uint32(data[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// ToPositive is Kafka's Utils.toPositive: n & 0x7fffffff. The partitioner
// masks the sign bit rather than taking an absolute value, so
// math.MinInt32 maps to 0 and -1 to math.MaxInt32.
func ToPositive(n int32) int32 {
	return n & 0x7fffffff
}

// PartitionForKey is the Java client's default partitioner for keyed records
// (BuiltInPartitioner.partitionForKey):
// toPositive(murmur2(key)) % numPartitions. A nil key hashes like an empty
// one; records without a key are spread by the sticky partitioner instead,
// which is not this function's business.
//
// It returns -1 when numPartitions is not positive (Java would divide by
// zero). Safe for concurrent use.
func PartitionForKey(key []byte, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return -1
	}
	return ToPositive(Murmur2(key)) % numPartitions
}

// JavaStringHashCode is java.lang.String.hashCode: s[0]*31^(n-1) + ... +
// s[n-1] with int32 overflow, over UTF-16 code units, so a rune outside the
// Basic Multilingual Plane counts as its two surrogate units.
//
// s is read as UTF-8. Each byte that is not part of a valid UTF-8 sequence is
// hashed as U+FFFD, which is what Java's decoder produces for the common
// malformed inputs (Kafka decodes protocol strings with replacement), though
// Java may fold some multi-byte malformed sequences into a single U+FFFD.
func JavaStringHashCode(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			// Surrogate pair, as Character.toChars would produce it.
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		// An invalid byte arrives as U+FFFD: one unit.
		h = 31*h + int32(r)
	}
	return h
}

// CoordinatorPartition is the partition of __consumer_offsets (for a group
// id) or __transaction_state (for a transactional id) whose leader is the
// coordinator: Utils.abs(id.hashCode()) % numPartitions, as
// GroupCoordinator.partitionFor and TransactionStateManager.partitionFor
// compute it. Utils.abs differs from Math.abs: abs(Integer.MIN_VALUE) is 0,
// not MIN_VALUE, so that id lands on partition 0.
//
// It returns -1 when numPartitions is not positive. Safe for concurrent use.
func CoordinatorPartition(id string, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return -1
	}
	h := JavaStringHashCode(id)
	switch {
	case h == -1<<31:
		h = 0
	case h < 0:
		h = -h
	}
	return h % numPartitions
}
