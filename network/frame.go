package network

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiVersionsKey is ApiVersions' API key: its response header is always v0,
// and an unsupported version of it is answered rather than refused.
const apiVersionsKey = 18

// errUnsupportedVersionCode is Kafka's UNSUPPORTED_VERSION error code.
const errUnsupportedVersionCode = 35

// Errors that make the server close a connection: Kafka answers none of them.
var (
	// errMalformedHeader is a request header that does not parse.
	errMalformedHeader = errors.New("malformed request header")
	// errUnknownAPIKey is an API key kmsg does not know.
	errUnknownAPIKey = errors.New("unknown api key")
	// errUnsupportedVersion is a version the handler does not serve, for
	// any API but ApiVersions.
	errUnsupportedVersion = errors.New("unsupported api version")
	// errMalformedBody is a request body kmsg cannot decode.
	errMalformedBody = errors.New("malformed request body")
)

// RequestHeader is a parsed Kafka request header (v0, v1 or v2).
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	// ClientID is the client.id the client sent; a null client id reads as
	// "", as in Kafka.
	ClientID string
	// HeaderVersion is 1, or 2 for flexible request versions (KIP-482; its
	// tagged fields are skipped), or 0 for ControlledShutdown v0.
	HeaderVersion int8
}

// Flexible reports whether the request version is flexible (KIP-482), and
// so whether the response header carries tagged fields — except for
// ApiVersions, whose response header is always v0 so that a client can read
// it before knowing what the broker supports.
func (h *RequestHeader) Flexible() bool { return h.HeaderVersion == 2 }

// responseHeaderFlexible reports whether the response header is v1.
func (h *RequestHeader) responseHeaderFlexible() bool {
	return h.HeaderVersion == 2 && h.APIKey != apiVersionsKey
}

// VersionRange reports the inclusive range of versions of an API key served
// on a listener; ok is false when the API is not served there.
type VersionRange func(key int16) (min, max int16, ok bool)

// decodeVerdict says what to do with a frame that decoded without error.
type decodeVerdict int

const (
	// verdictHandle: hand the request to the Handler.
	verdictHandle decodeVerdict = iota
	// verdictUnsupportedApiVersions: answer with a v0 ApiVersions response
	// carrying UNSUPPORTED_VERSION (KIP-511), without parsing the body.
	verdictUnsupportedApiVersions
)

// requestDecoder decodes request frames for one connection. It caches the
// last client id so a connection's steady client.id costs no allocation.
//
// Concurrency: owned by the connection's reader goroutine.
type requestDecoder struct {
	lastClientID string
}

// decode parses one request frame (the bytes after the 4-byte size). On
// success it returns the header, and the decoded request for verdictHandle.
// Errors wrap errMalformedHeader, errUnknownAPIKey, errUnsupportedVersion or
// errMalformedBody; every one of them means: log and close the connection,
// as Kafka does. It never panics, whatever the input.
func (d *requestDecoder) decode(frame []byte, versions VersionRange) (hdr RequestHeader, msg kmsg.Request, verdict decodeVerdict, err error) {
	if len(frame) < 8 {
		return hdr, nil, 0, fmt.Errorf("%w: %d bytes", errMalformedHeader, len(frame))
	}
	hdr.APIKey = int16(binary.BigEndian.Uint16(frame[0:]))
	hdr.APIVersion = int16(binary.BigEndian.Uint16(frame[2:]))
	hdr.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	msg = kmsg.RequestForKey(hdr.APIKey)
	if msg == nil {
		return hdr, nil, 0, fmt.Errorf("%w %d", errUnknownAPIKey, hdr.APIKey)
	}
	msg.SetVersion(hdr.APIVersion)
	// The header version follows from the request version's flexibility,
	// which kmsg knows for every version, even ones past its maximum.
	switch {
	case hdr.APIKey == 7 && hdr.APIVersion == 0: // ControlledShutdown v0
		hdr.HeaderVersion = 0
	case msg.IsFlexible():
		hdr.HeaderVersion = 2
	default:
		hdr.HeaderVersion = 1
	}
	body := frame[8:]
	if hdr.HeaderVersion >= 1 {
		if body, err = d.readClientID(body, &hdr); err != nil {
			return hdr, nil, 0, err
		}
	}
	if hdr.HeaderVersion == 2 {
		if body, err = SkipTags(body); err != nil {
			return hdr, nil, 0, fmt.Errorf("%w: %s v%d: %v", errMalformedHeader, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, err)
		}
	}
	lo, hi, ok := versions(hdr.APIKey)
	if !ok || hdr.APIVersion < lo || hdr.APIVersion > hi || hdr.APIVersion > msg.MaxVersion() {
		if hdr.APIKey == apiVersionsKey {
			return hdr, nil, verdictUnsupportedApiVersions, nil
		}
		if !ok {
			return hdr, nil, 0, fmt.Errorf("%w: %s is not served on this listener", errUnsupportedVersion, kmsg.NameForKey(hdr.APIKey))
		}
		return hdr, nil, 0, fmt.Errorf("%w: %s v%d (serving v%d–v%d)", errUnsupportedVersion, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, lo, hi)
	}
	if err := readBody(msg, body); err != nil {
		return hdr, nil, 0, fmt.Errorf("%w: %s v%d: %v", errMalformedBody, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, err)
	}
	return hdr, msg, verdictHandle, nil
}

// readClientID reads the header's nullable client id (always a non-compact
// int16-length string, even in header v2, so that old brokers can read an
// ApiVersions request of any version).
func (d *requestDecoder) readClientID(b []byte, hdr *RequestHeader) ([]byte, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: truncated client id", errMalformedHeader)
	}
	n := int(int16(binary.BigEndian.Uint16(b)))
	b = b[2:]
	switch {
	case n == -1:
		hdr.ClientID = ""
		return b, nil
	case n < 0 || n > len(b):
		return nil, fmt.Errorf("%w: client id length %d with %d bytes left", errMalformedHeader, n, len(b))
	}
	if raw := b[:n]; string(raw) == d.lastClientID { // no allocation
		hdr.ClientID = d.lastClientID
	} else {
		d.lastClientID = string(raw)
		hdr.ClientID = d.lastClientID
	}
	return b[n:], nil
}

// SkipTags skips a KIP-482 tagged-field section at the front of b, as in a
// request or response header v2/v1 (no header tags are defined yet, and
// unknown tags must be ignored).
func SkipTags(b []byte) ([]byte, error) {
	count, n := binary.Uvarint(b)
	if n <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[n:]
	if count > uint64(len(b)) { // each tag takes at least two bytes
		return nil, fmt.Errorf("%d tags in %d bytes", count, len(b))
	}
	for i := uint64(0); i < count; i++ {
		_, n := binary.Uvarint(b)
		if n <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[n:]
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return nil, errors.New("bad tag size")
		}
		b = b[n+int(size):]
	}
	return b, nil
}

// readBody decodes a request body with kmsg. Strings in msg alias body
// (UnsafeReadFrom), which is safe because each frame has its own buffer
// that is never reused. kmsg bounds its allocations by the input length;
// the recover is a last line of defence, since a panic here would take down
// the broker on untrusted input.
func readBody(msg kmsg.Request, body []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("decoder panic: %v", r)
		}
	}()
	if u, ok := msg.(kmsg.UnsafeReadFrom); ok {
		return u.UnsafeReadFrom(body)
	}
	return msg.ReadFrom(body)
}

// unsupportedApiVersionsResponse is Kafka's answer to an ApiVersions request
// of a version it does not serve (KIP-511): a v0 response with
// UNSUPPORTED_VERSION listing only ApiVersions' own range, so the client can
// retry with a version the broker knows.
func unsupportedApiVersionsResponse(versions VersionRange) (*kmsg.ApiVersionsResponse, bool) {
	lo, hi, ok := versions(apiVersionsKey)
	if !ok {
		return nil, false
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = errUnsupportedVersionCode
	key := kmsg.NewApiVersionsResponseApiKey()
	key.ApiKey, key.MinVersion, key.MaxVersion = apiVersionsKey, lo, hi
	resp.ApiKeys = append(resp.ApiKeys, key)
	return resp, true
}
