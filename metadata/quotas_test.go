package metadata

import "testing"

// Doubles render as Java renders them, as Kafka shows them in
// DescribeConfigs and kafka-configs.sh.
func TestJavaDouble(t *testing.T) {
	for v, want := range map[float64]string{
		0.5: "0.5", 1048576: "1048576.0", 0: "0.0", 1e7: "1.0E7", 1.7976931348623157e308: "1.7976931348623157E308",
		0.0001: "1.0E-4", 12345678.5: "1.23456785E7",
	} {
		if got := JavaDouble(v); got != want {
			t.Errorf("JavaDouble(%v) = %q, want %q", v, got, want)
		}
	}
}
