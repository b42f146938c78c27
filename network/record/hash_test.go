package record

import (
	"math"
	"math/rand/v2"
	"testing"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMurmur2MatchesKafkaUtilsTest(t *testing.T) {
	// org.apache.kafka.common.utils.UtilsTest.testMurmur2.
	for _, tc := range []struct {
		key  []byte
		want int32
	}{
		{[]byte("21"), -973932308},
		{[]byte("foobar"), -790332482},
		{[]byte("a-little-bit-long-string"), -985981536},
		{[]byte("a-little-bit-longer-string"), -1486304829},
		{[]byte("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"), -58897971},
		{[]byte{'a', 'b', 'c'}, 479470107},
	} {
		if got := Murmur2(tc.key); got != tc.want {
			t.Errorf("Murmur2(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

func TestPartitionForKeyMatchesFranzGoDefaultPartitioner(t *testing.T) {
	// kgo's StickyKeyPartitioner(nil) is toPositive(murmur2(key)) % n, the
	// Java default for keyed records. With n = MaxInt32 the partition is
	// nearly the whole hash, so this compares the hashes themselves.
	part := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		key := make([]byte, rng.IntN(70))
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		for _, n := range []int32{1, 3, 7, 64, 1000, math.MaxInt32} {
			want := part.Partition(&kgo.Record{Key: key}, int(n))
			if got := PartitionForKey(key, n); int(got) != want {
				t.Fatalf("key %d %x, %d partitions: got %d, franz-go %d", i, key, n, got, want)
			}
		}
	}
}

func TestPartitionForKeyMasksTheSignBit(t *testing.T) {
	// murmur2("21") is negative: Java masks it (toPositive), it does not
	// negate it, so the partition is (-973932308 & 0x7fffffff) % n.
	const masked = 1173551340 // -973932308 & 0x7fffffff
	for _, n := range []int32{1, 6, 7, 100} {
		if got, want := PartitionForKey([]byte("21"), n), int32(masked%int64(n)); got != want {
			t.Errorf("PartitionForKey(21, %d) = %d, want %d", n, got, want)
		}
	}
	if got := PartitionForKey(nil, 10); got != PartitionForKey([]byte{}, 10) {
		t.Errorf("nil key hashes unlike an empty key: %d", got)
	}
	for _, n := range []int32{0, -1, math.MinInt32} {
		if got := PartitionForKey([]byte("k"), n); got != -1 {
			t.Errorf("PartitionForKey with %d partitions = %d, want -1", n, got)
		}
	}
}

func TestToPositiveClearsOnlyTheSignBit(t *testing.T) {
	for _, tc := range []struct{ in, want int32 }{
		{0, 0},
		{5, 5},
		{-1, math.MaxInt32},
		{math.MinInt32, 0},
		{math.MaxInt32, math.MaxInt32},
		{-973932308, 1173551340},
	} {
		if got := ToPositive(tc.in); got != tc.want {
			t.Errorf("ToPositive(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestJavaStringHashCode(t *testing.T) {
	// Expected values computed from the UTF-16 code units, as
	// String.hashCode does.
	for _, tc := range []struct {
		s    string
		want int32
	}{
		{"", 0},
		{"hello", 99162322},
		{"Aa", 2112}, // the classic collision with "BB"
		{"BB", 2112},
		{"polygenelubricants", math.MinInt32},
		{"my-group", -1906497762},
		{"😀", 0xD83D*31 + 0xDE00}, // U+1F600 is two surrogate units
		{"a😀b", 57849694},
		{"\xff", 0xFFFD}, // an invalid byte decodes to U+FFFD
	} {
		if got := JavaStringHashCode(tc.s); got != tc.want {
			t.Errorf("JavaStringHashCode(%q) = %d, want %d", tc.s, got, tc.want)
		}
	}
}

func TestJavaStringHashCodeOverUTF16Units(t *testing.T) {
	// A second, independent formulation: encode to UTF-16 and hash the
	// units. Mixes ASCII, BMP and supplementary runes.
	alphabet := []rune("az09-_.é漢字🙂😀𝄞\U0010FFFF")
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		runes := make([]rune, rng.IntN(40))
		for i := range runes {
			runes[i] = alphabet[rng.IntN(len(alphabet))]
		}
		var want int32
		for _, u := range utf16.Encode(runes) {
			want = 31*want + int32(u)
		}
		if got := JavaStringHashCode(string(runes)); got != want {
			t.Fatalf("JavaStringHashCode(%q) = %d, want %d", string(runes), got, want)
		}
	}
}

func TestCoordinatorPartition(t *testing.T) {
	for _, tc := range []struct {
		id   string
		n    int32
		want int32
	}{
		{"hello", 50, 22},
		{"", 50, 0},
		// Negative hash: Utils.abs, then modulo.
		{"my-group", 50, 12},
		{"my-group", 1, 0},
		// hashCode is Integer.MIN_VALUE: Utils.abs gives 0, not a
		// negative number, so the coordinator is partition 0.
		{"polygenelubricants", 50, 0},
		{"polygenelubricants", 7, 0},
		{"😀", 50, 49},
		{"id", 0, -1},
		{"id", -3, -1},
	} {
		if got := CoordinatorPartition(tc.id, tc.n); got != tc.want {
			t.Errorf("CoordinatorPartition(%q, %d) = %d, want %d", tc.id, tc.n, got, tc.want)
		}
	}
}

func BenchmarkMurmur2(b *testing.B) {
	for _, n := range []int{8, 36, 256} {
		key := make([]byte, n)
		for i := range key {
			key[i] = byte(i * 7)
		}
		b.Run(sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				Murmur2(key)
			}
		})
	}
}
