package metadata

import (
	"fmt"
	"testing"
)

// BenchmarkApplyISRChange applies one PartitionChangeRecord (an ISR
// shrink, the commonest metadata write under churn) to an image of many
// topics: what every controller and broker pays per such batch, and a
// restart per batch it replays.
func BenchmarkApplyISRChange(b *testing.B) {
	for _, topics := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("topics=%d", topics), func(b *testing.B) {
			img := EmptyImage()
			ids := make([]Uuid, topics)
			var off int64
			for i := range topics {
				ids[i] = NewUuid()
				recs := []Record{&TopicRecord{Name: fmt.Sprintf("t%05d", i), TopicID: ids[i]}}
				for p := range int32(3) {
					recs = append(recs, &PartitionRecord{TopicID: ids[i], PartitionID: p, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
				}
				var err error
				if img, _, err = img.Apply(off, recs); err != nil {
					b.Fatal(err)
				}
				off++
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				isr := []int32{1, 2, 3}
				if i%2 == 0 {
					isr = isr[:2]
				}
				next, _, err := img.Apply(off, []Record{&PartitionChangeRecord{TopicID: ids[i%topics], PartitionID: int32(i % 3), ISR: isr, Leader: NoLeaderChange}})
				if err != nil {
					b.Fatal(err)
				}
				img = next
				off++
			}
		})
	}
}
