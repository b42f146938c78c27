package network

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Then applies its function to a Response at once and to a Deferred's
// response exactly once, whether the Deferred completes before or after
// Then is called, or at the same time; a Deferred completed without a
// response stays without one.
func TestThen(t *testing.T) {
	mark := func(r kmsg.Response) kmsg.Response {
		r.(*kmsg.MetadataResponse).ThrottleMillis++
		return r
	}
	res := Then(&Response{Msg: kmsg.NewPtrMetadataResponse()}, mark).(*Response)
	if res.Msg.(*kmsg.MetadataResponse).ThrottleMillis != 1 {
		t.Fatal("Response: not applied")
	}
	if r := Then(nil, mark); r != nil {
		t.Fatalf("nil: %v", r)
	}
	for i := range 2000 {
		d := NewDeferred()
		var wg sync.WaitGroup
		wg.Add(1)
		complete := func() {
			defer wg.Done()
			if i%5 == 0 {
				d.Complete(nil)
			} else {
				d.Complete(&Response{Msg: kmsg.NewPtrMetadataResponse()})
			}
		}
		if i%2 == 0 {
			go complete()
		} else {
			complete()
		}
		out := Then(d, mark).(*Deferred)
		wg.Wait()
		<-out.Done()
		switch {
		case i%5 == 0 && out.resp != nil:
			t.Fatalf("round %d: a nil response became %v", i, out.resp)
		case i%5 != 0 && out.resp.Msg.(*kmsg.MetadataResponse).ThrottleMillis != 1:
			t.Fatalf("round %d: applied %d times", i, out.resp.Msg.(*kmsg.MetadataResponse).ThrottleMillis)
		}
	}
}
