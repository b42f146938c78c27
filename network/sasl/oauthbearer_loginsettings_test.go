package sasl

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A login retries its token endpoint as Kafka's HttpJwtRetriever does:
// transport errors, an empty answer and statuses it may outlive (5xx, 429)
// with doubling waits within sasl.login.retry.backoff.max.ms of the first
// request; the statuses retrying cannot change (401, 400, ...) once; and
// with a zero backoff once. It takes a 201 as a 200.
func TestLoginRetriesTheTokenEndpoint(t *testing.T) {
	var mu sync.Mutex
	var answers []int // the statuses the next requests get; then 200
	var times []time.Time
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		times = append(times, time.Now())
		status := http.StatusOK
		if len(answers) > 0 {
			status, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		switch status {
		case http.StatusOK, http.StatusCreated:
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(map[string]any{"access_token": "a.b.c", "expires_in": 3600})
		case 0: // a 200 without a body
		default:
			http.Error(w, `{"error":"temporarily_unavailable"}`, status)
		}
	}))
	defer idp.Close()
	login := func(backoff, max string, statuses ...int) (time.Duration, int, error) {
		t.Helper()
		mu.Lock()
		answers, times = statuses, nil
		mu.Unlock()
		l, err := NewOAuthBearerLogin(map[string]string{"clientId": "a", "clientSecret": "b"}, settings(map[string]string{
			"sasl.oauthbearer.token.endpoint.url": idp.URL,
			"sasl.login.retry.backoff.ms":         backoff, "sasl.login.retry.backoff.max.ms": max,
		}))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = l.Token(context.Background())
		mu.Lock()
		defer mu.Unlock()
		return time.Since(start), len(times), err
	}

	took, n, err := login("40", "5000", 503, 0, 429)
	if err != nil || n != 4 {
		t.Fatalf("after 503, an empty 200 and 429: %v after %d requests, want a token after 4", err, n)
	}
	if took < (40+80+160)*time.Millisecond {
		t.Errorf("4 requests in %v: the waits do not double from 40 ms", took)
	}
	if _, n, err := login("40", "5000", 201); err != nil || n != 1 {
		t.Errorf("a 201: %v after %d requests", err, n)
	}
	for _, status := range []int{400, 401, 403, 404, 501} {
		if _, n, err := login("10", "5000", status, status, status); err == nil || n != 1 {
			t.Errorf("HTTP %d: %v after %d requests, want an error after 1", status, err, n)
		}
	}
	took, n, err = login("50", "300", 500, 500, 500, 500, 500, 500, 500)
	if err == nil || !strings.Contains(err.Error(), "500") || !strings.Contains(err.Error(), "attempts") || n < 3 || n > 5 {
		t.Errorf("a failing endpoint with 300 ms of retries: %v after %d requests", err, n)
	}
	if took > 2*time.Second {
		t.Errorf("retried for %v, past sasl.login.retry.backoff.max.ms=300", took)
	}
	if _, n, err := login("0", "5000", 503); err == nil || n != 1 {
		t.Errorf("sasl.login.retry.backoff.ms=0: %v after %d requests, want one request", err, n)
	}

	// A context that ends stops the retries.
	mu.Lock()
	answers = []int{503, 503, 503, 503, 503, 503, 503, 503}
	mu.Unlock()
	l, _ := NewOAuthBearerLogin(map[string]string{"clientId": "a", "clientSecret": "b"}, settings(map[string]string{
		"sasl.oauthbearer.token.endpoint.url": idp.URL, "sasl.login.retry.backoff.ms": "1000"}))
	var logged atomic.Int64
	l.Log = func(string, ...any) { logged.Add(1) }
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := l.Token(ctx); err == nil || time.Since(start) > 900*time.Millisecond {
		t.Errorf("a context ending 200 ms in: %v after %v", err, time.Since(start))
	}
	if logged.Load() != 1 {
		t.Errorf("%d retries logged, want 1", logged.Load())
	}
}

// sasl.login.read.timeout.ms bounds each read from the identity provider:
// an endpoint that stalls is given up on and the request retried;
// sasl.login.connect.timeout.ms bounds the connect.
func TestLoginTimeouts(t *testing.T) {
	var stalls atomic.Int64
	stalls.Store(1)
	release := make(chan struct{})
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if stalls.Add(-1) >= 0 {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": "a.b.c", "expires_in": 3600})
	}))
	defer idp.Close()
	defer close(release) // before the server closes
	l, err := NewOAuthBearerLogin(map[string]string{"clientId": "a", "clientSecret": "b"}, settings(map[string]string{
		"sasl.oauthbearer.token.endpoint.url": idp.URL, "sasl.login.read.timeout.ms": "200", "sasl.login.retry.backoff.ms": "10"}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if tok, err := l.Token(context.Background()); err != nil || tok != "a.b.c" {
		t.Fatalf("token %q %v", tok, err)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
		t.Errorf("a stalled request then a good one took %v, want the 200 ms read timeout and a retry", took)
	}

	// A listener with a backlog of 0 that never accepts: once its queue
	// is full, the kernel drops further SYNs and a connect hangs.
	addr := fullListener(t)
	l, err = NewOAuthBearerLogin(map[string]string{"clientId": "a", "clientSecret": "b"}, settings(map[string]string{
		"sasl.oauthbearer.token.endpoint.url": "http://" + addr + "/token",
		"sasl.login.connect.timeout.ms":       "100", "sasl.login.retry.backoff.ms": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if _, err := l.Token(context.Background()); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("a connect that cannot complete: %v after %v", err, time.Since(start))
	}
}

// A token is renewed as Kafka's ExpiringCredentialRefreshingLogin
// schedules it: at the refresh window factor (plus jitter) of its
// lifetime, within the buffer before expiry and the minimum period after
// it was got, both ignored for a token too short for them.
func TestLoginRenewal(t *testing.T) {
	got := time.Unix(1_800_000_000, 0)
	s := DefaultLoginSettings()
	s.RefreshWindowJitter = 0
	for _, tc := range []struct {
		factor    float64
		minPeriod time.Duration
		buffer    time.Duration
		life      time.Duration
		want      time.Duration
	}{
		{0.8, time.Minute, 5 * time.Minute, time.Hour, 48 * time.Minute},
		{1, time.Minute, 5 * time.Minute, time.Hour, 55 * time.Minute},        // the buffer
		{0.5, 15 * time.Minute, 0, 20 * time.Minute, 15 * time.Minute},        // the minimum period
		{0.8, time.Minute, 5 * time.Minute, 5 * time.Minute, 4 * time.Minute}, // too short for both
		{0.8, time.Minute, 5 * time.Minute, 0, 0},                             // no lifetime: at once
	} {
		s.RefreshWindowFactor, s.RefreshMinPeriod, s.RefreshBuffer = tc.factor, tc.minPeriod, tc.buffer
		if at := s.renewAt(got, got.Add(tc.life)); at.Sub(got) != tc.want {
			t.Errorf("%+v: renewed after %v, want %v", tc, at.Sub(got), tc.want)
		}
	}
	s = DefaultLoginSettings() // jitter 0.05
	for range 100 {
		if d := s.renewAt(got, got.Add(time.Hour)).Sub(got); d < 48*time.Minute || d > 51*time.Minute {
			t.Fatalf("renewed after %v, want 48–51 minutes", d)
		}
	}
}

// The sasl.login.* settings are read with Kafka's defaults and ranges,
// and a value out of range is refused whatever the login, naming it.
func TestLoginSettingsFrom(t *testing.T) {
	s, connect, read, err := LoginSettingsFrom(settings(nil))
	if err != nil || connect != 0 || read != 0 || s.RetryBackoff != 100*time.Millisecond || s.RetryBackoffMax != 10*time.Second ||
		s.RefreshWindowFactor != 0.8 || s.RefreshWindowJitter != 0.05 || s.RefreshMinPeriod != time.Minute || s.RefreshBuffer != 5*time.Minute {
		t.Fatalf("defaults %+v %v %v %v", s, connect, read, err)
	}
	s, connect, read, err = LoginSettingsFrom(settings(map[string]string{
		"sasl.login.retry.backoff.ms": "250", "sasl.login.retry.backoff.max.ms": "2000",
		"sasl.login.refresh.window.factor": "0.9", "sasl.login.refresh.window.jitter": "0",
		"sasl.login.refresh.min.period.seconds": "0", "sasl.login.refresh.buffer.seconds": "30",
		"sasl.login.connect.timeout.ms": "1500", "sasl.login.read.timeout.ms": "3000",
	}))
	if err != nil || connect != 1500*time.Millisecond || read != 3*time.Second || s.RetryBackoff != 250*time.Millisecond ||
		s.RetryBackoffMax != 2*time.Second || s.RefreshWindowFactor != 0.9 || s.RefreshWindowJitter != 0 || s.RefreshMinPeriod != 0 ||
		s.RefreshBuffer != 30*time.Second {
		t.Fatalf("set %+v %v %v %v", s, connect, read, err)
	}
	for key, v := range map[string]string{
		"sasl.login.refresh.window.factor":      "0.4",
		"sasl.login.refresh.window.jitter":      "0.3",
		"sasl.login.refresh.min.period.seconds": "901",
		"sasl.login.refresh.buffer.seconds":     "3601",
		"sasl.login.retry.backoff.ms":           "-1",
		"sasl.login.retry.backoff.max.ms":       "soon",
		"sasl.login.connect.timeout.ms":         "-5",
		"sasl.login.read.timeout.ms":            "1.5",
	} {
		// The unsecured login refuses them too, as Kafka's config does.
		_, err := NewOAuthBearerLogin(map[string]string{"unsecuredLoginStringClaim_sub": "x"}, settings(map[string]string{key: v}))
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%s: %v", key, v, err)
		}
	}
	if _, _, _, err := LoginSettingsFrom(settings(map[string]string{"sasl.login.retry.backoff.ms": "500", "sasl.login.retry.backoff.max.ms": "100"})); err == nil ||
		!strings.Contains(err.Error(), "less than") {
		t.Errorf("a max below the backoff: %v", err)
	}
}

// fullListener is the address of a listener with a backlog of 0 that
// accepts nothing, whose queue is full, so that a connect to it hangs
// (Linux drops a SYN to a full accept queue). It skips the test where the
// queue does not fill.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return addr // this connect hung: the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("the accept queue did not fill; the connect timeout cannot be shown here")
	return ""
}

// A connection waiting for another's token request, which is retrying a
// down identity provider, gives up when its own context ends.
func TestLoginWaiterKeepsItsDeadline(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer idp.Close()
	l, err := NewOAuthBearerLogin(map[string]string{"clientId": "a", "clientSecret": "b"}, settings(map[string]string{
		"sasl.oauthbearer.token.endpoint.url": idp.URL, "sasl.login.retry.backoff.ms": "2000", "sasl.login.retry.backoff.max.ms": "2000"}))
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan error, 1)
	go func() { _, err := l.Token(context.Background()); first <- err }()
	time.Sleep(100 * time.Millisecond) // the first is retrying now
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := l.Token(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Errorf("the waiter: %v after %v, want its deadline at 100 ms", err, time.Since(start))
	}
	if err := <-first; err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("the first: %v", err)
	}
}
