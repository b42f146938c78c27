package network

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// everyVersion serves every version kmsg can decode, so the fuzzer reaches
// every body decoder.
func everyVersion(key int16) (int16, int16, bool) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return 0, 0, false
	}
	return 0, req.MaxVersion(), true
}

// FuzzRequestFrame feeds arbitrary frames (the bytes after the size) to the
// request header and body decoder: it must never panic, and what it accepts
// must be self-consistent and re-encodable.
func FuzzRequestFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, frame []byte) {
		var d requestDecoder
		hdr, msg, verdict, err := d.decode(frame, everyVersion)
		if err != nil {
			return
		}
		switch verdict {
		case verdictUnsupportedApiVersions:
			if hdr.APIKey != apiVersionsKey || msg != nil {
				t.Fatalf("unsupported-ApiVersions verdict for key %d", hdr.APIKey)
			}
			if _, ok := unsupportedApiVersionsResponse(everyVersion); !ok {
				t.Fatal("no ApiVersions range")
			}
		case verdictHandle:
			if msg == nil || msg.Key() != hdr.APIKey || msg.GetVersion() != hdr.APIVersion {
				t.Fatalf("decoded %v for header %+v", msg, hdr)
			}
			if (hdr.HeaderVersion == 2) != msg.IsFlexible() && !(hdr.APIKey == 7 && hdr.APIVersion == 0) {
				t.Fatalf("header v%d for flexible=%v", hdr.HeaderVersion, msg.IsFlexible())
			}
			// The broker may echo decoded fields back: encoding what was
			// decoded must not panic either.
			_ = msg.AppendTo(nil)
		}
	})
}

func TestDecodeHeaderVersions(t *testing.T) {
	var d requestDecoder
	cases := []struct {
		name     string
		frame    []byte
		hdrVer   int8
		clientID string
	}{
		{"Metadata v1: header v1", rawFrame(3, 1, 5, "abc", false, []byte{0, 0, 0, 0})[4:], 1, "abc"},
		{"Metadata v9: header v2", rawFrame(3, 9, 5, "abc", true, []byte{1, 0, 0, 0, 0})[4:], 2, "abc"},
		{"null client id reads as empty", []byte{0, 3, 0, 1, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1, ""},
		{"ControlledShutdown v0: header v0", []byte{0, 7, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1}, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hdr, msg, verdict, err := d.decode(tc.frame, everyVersion)
			if err != nil || verdict != verdictHandle {
				t.Fatalf("%v %v", verdict, err)
			}
			if hdr.HeaderVersion != tc.hdrVer || hdr.ClientID != tc.clientID {
				t.Fatalf("header %+v", hdr)
			}
			if msg.GetVersion() != hdr.APIVersion {
				t.Fatal("version not set")
			}
		})
	}
}

func TestDecodeReusesTheClientIDString(t *testing.T) {
	var d requestDecoder
	frame := rawFrame(3, 1, 5, "steady-client", false, []byte{0, 0, 0, 0})[4:]
	metadataOnly := func(int16) (int16, int16, bool) { return 0, 12, true }
	d.decode(frame, metadataOnly)
	allocs := testing.AllocsPerRun(100, func() {
		hdr, _, _, _ := d.decode(frame, metadataOnly)
		if hdr.ClientID != "steady-client" {
			t.Fatal(hdr.ClientID)
		}
	})
	// RequestForKey's message is the only allocation left.
	if allocs > 1 {
		t.Fatalf("%v allocations per decode", allocs)
	}
}
