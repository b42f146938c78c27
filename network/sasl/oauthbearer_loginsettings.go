package sasl

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// LoginSettings are when an OAUTHBEARER login renews its token and how it
// retries the identity provider's token endpoint: Kafka's sasl.login.*
// settings, which its OAuthBearerLoginCallbackHandler (HttpJwtRetriever)
// and ExpiringCredentialRefreshingLogin read. DefaultLoginSettings are
// Kafka's defaults: start from them, since a zero field is zero, not
// Kafka's default (a zero RefreshWindowFactor renews at every connection).
type LoginSettings struct {
	// RetryBackoff is the wait after a failed request to the token
	// endpoint, doubled after each further failure
	// (sasl.login.retry.backoff.ms); RetryBackoffMax bounds the time from
	// the first request during which requests are retried
	// (sasl.login.retry.backoff.max.ms). A refusal that retrying cannot
	// change (400, 401, 403, 404, ...: Kafka's list) is not retried, and
	// a zero RetryBackoff or RetryBackoffMax makes one attempt, as in
	// Kafka.
	RetryBackoff, RetryBackoffMax time.Duration
	// A token is renewed once RefreshWindowFactor of its lifetime, plus
	// up to RefreshWindowJitter more at random, has passed
	// (sasl.login.refresh.window.factor and .jitter), but not sooner than
	// RefreshMinPeriod after it was got and not later than RefreshBuffer
	// before it expires (sasl.login.refresh.min.period.seconds and
	// .buffer.seconds); for a token whose lifetime is shorter than those
	// two together, the two are ignored, as in Kafka.
	RefreshWindowFactor, RefreshWindowJitter float64
	RefreshMinPeriod, RefreshBuffer          time.Duration
	// Log, if set, reports each failed request that will be retried.
	Log func(msg string, args ...any)
}

// DefaultLoginSettings are Kafka's defaults of the sasl.login.* settings
// LoginSettings holds.
func DefaultLoginSettings() LoginSettings {
	return LoginSettings{
		RetryBackoff: 100 * time.Millisecond, RetryBackoffMax: 10 * time.Second,
		RefreshWindowFactor: 0.8, RefreshWindowJitter: 0.05,
		RefreshMinPeriod: 60 * time.Second, RefreshBuffer: 300 * time.Second,
	}
}

// loginSettings is s, or Kafka's defaults when s is nil.
func loginSettings(s *LoginSettings) *LoginSettings {
	if s == nil {
		d := DefaultLoginSettings()
		return &d
	}
	return s
}

// LoginSettingsFrom reads the sasl.login.* settings LoginSettings holds
// from get ("" when unset), with Kafka's defaults and ranges, and
// sasl.login.connect.timeout.ms and sasl.login.read.timeout.ms, which
// LoginHTTPClient applies (0 when unset: no bound).
func LoginSettingsFrom(get func(key string) string) (s LoginSettings, connect, read time.Duration, err error) {
	s = DefaultLoginSettings()
	integer := func(key string, lo, hi int64) (int64, bool) {
		v := get(key)
		if v == "" || err != nil {
			return 0, false
		}
		n, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || n < lo || n > hi {
			err = fmt.Errorf("%s=%s: want a whole number from %d to %d", key, v, lo, hi)
			return 0, false
		}
		return n, true
	}
	fraction := func(key string, f *float64, lo, hi float64) {
		if v := get(key); v != "" && err == nil {
			n, perr := strconv.ParseFloat(v, 64)
			if perr != nil || n < lo || n > hi {
				err = fmt.Errorf("%s=%s: want a number from %g to %g", key, v, lo, hi)
				return
			}
			*f = n
		}
	}
	const maxMillis = math.MaxInt64 / int64(time.Millisecond)
	if n, ok := integer("sasl.login.retry.backoff.ms", 0, maxMillis); ok {
		s.RetryBackoff = time.Duration(n) * time.Millisecond
	}
	if n, ok := integer("sasl.login.retry.backoff.max.ms", 0, maxMillis); ok {
		s.RetryBackoffMax = time.Duration(n) * time.Millisecond
	}
	fraction("sasl.login.refresh.window.factor", &s.RefreshWindowFactor, 0.5, 1)
	fraction("sasl.login.refresh.window.jitter", &s.RefreshWindowJitter, 0, 0.25)
	if n, ok := integer("sasl.login.refresh.min.period.seconds", 0, 900); ok {
		s.RefreshMinPeriod = time.Duration(n) * time.Second
	}
	if n, ok := integer("sasl.login.refresh.buffer.seconds", 0, 3600); ok {
		s.RefreshBuffer = time.Duration(n) * time.Second
	}
	if n, ok := integer("sasl.login.connect.timeout.ms", 0, math.MaxInt32); ok {
		connect = time.Duration(n) * time.Millisecond
	}
	if n, ok := integer("sasl.login.read.timeout.ms", 0, math.MaxInt32); ok {
		read = time.Duration(n) * time.Millisecond
	}
	if err == nil && s.RetryBackoffMax < s.RetryBackoff {
		err = fmt.Errorf("sasl.login.retry.backoff.max.ms=%d is less than sasl.login.retry.backoff.ms=%d",
			s.RetryBackoffMax.Milliseconds(), s.RetryBackoff.Milliseconds())
	}
	return s, connect, read, err
}

// renewAt is when a token got at got and expiring at expires is to be
// renewed: Kafka's ExpiringCredentialRefreshingLogin.refreshMs, with the
// time got as both the token's start and the time of reckoning. A token
// without a lifetime is renewed at once.
func (s *LoginSettings) renewAt(got, expires time.Time) time.Time {
	life := expires.Sub(got)
	if life <= 0 {
		return got
	}
	proposed := got.Add(time.Duration(float64(life) * (s.RefreshWindowFactor + s.RefreshWindowJitter*rand.Float64())))
	if life < s.RefreshMinPeriod+s.RefreshBuffer {
		return proposed
	}
	if end := expires.Add(-s.RefreshBuffer); proposed.After(end) {
		return end
	}
	return later(proposed, got.Add(s.RefreshMinPeriod))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// errFinal marks a failed request that retrying cannot change.
var errFinal = errors.New("not retried")

// retry runs attempt until it succeeds, fails with errFinal, or the
// retries' time is up, as Kafka's Retry does: waits of RetryBackoff,
// doubling, within RetryBackoffMax of the first attempt. It gives up
// early when ctx is done.
func (s *LoginSettings) retry(ctx context.Context, what string, attempt func() error) error {
	end := time.Now().Add(s.RetryBackoffMax)
	wait := s.RetryBackoff
	for n := 1; ; n++ {
		err := attempt()
		if err == nil || errors.Is(err, errFinal) {
			return err
		}
		pause := min(wait, time.Until(end))
		if pause <= 0 || ctx.Err() != nil {
			if n > 1 {
				return fmt.Errorf("%w (gave up after %d attempts)", err, n)
			}
			return err
		}
		if s.Log != nil {
			s.Log("an OAUTHBEARER login's request failed; retrying", "endpoint", what, "attempt", n, "retry_in", pause, "error", err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (then %w, after %d attempts)", err, ctx.Err(), n)
		case <-t.C:
		}
		wait *= 2
	}
}

// finalStatus reports the HTTP statuses of a token endpoint's answer that
// are not retried: Kafka's HttpJwtRetriever.UNRETRYABLE_HTTP_CODES.
func finalStatus(code int) bool {
	switch code {
	case 400, 401, 402, 403, 404, 405, 406, 407, 409, 410, 411, 412, 413, 414, 415, 501, 505:
		return true
	}
	return false
}

// LoginHTTPClient is hc (nil: http.DefaultClient) with Kafka's
// sasl.login.connect.timeout.ms and sasl.login.read.timeout.ms: connect
// bounds a TCP connect to the identity provider, read each read from it
// (Java's socket timeout; each request then has a connection of its own,
// as Kafka's do). Zero leaves a bound off; hc itself is not changed.
func LoginHTTPClient(hc *http.Client, connect, read time.Duration) *http.Client {
	if connect <= 0 && read <= 0 {
		return hc
	}
	if hc == nil {
		hc = http.DefaultClient
	}
	var tr *http.Transport
	switch t := hc.Transport.(type) {
	case nil:
		tr = http.DefaultTransport.(*http.Transport).Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return hc // a transport of the caller's, which sets its own bounds
	}
	dialer := &net.Dialer{Timeout: connect, KeepAlive: 30 * time.Second}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil || read <= 0 {
			return c, err
		}
		return &readTimeoutConn{Conn: c, timeout: read}, nil
	}
	if read > 0 {
		tr.DisableKeepAlives = true // an idle connection's reads would time out
	}
	out := *hc
	out.Transport = tr
	return &out
}

// readTimeoutConn bounds each Read by timeout.
type readTimeoutConn struct {
	net.Conn
	timeout time.Duration
}

func (c *readTimeoutConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

// heldToken is the token a login holds (ClientCredentials', JWTBearer's)
// and when to renew it. Its requests are made one at a time, so that
// concurrent connections share the token one gets; a caller gives up
// waiting when its context ends, as it would not behind a sync.Mutex
// while a request retries for sasl.login.retry.backoff.max.ms. Its zero
// value holds no token.
type heldToken struct {
	once    sync.Once
	turn    chan struct{} // holds a value while a caller has the turn
	token   string
	renewAt time.Time
}

// get returns the token held, or one from fetch (with when to renew it)
// when none is held or it is due for renewal. tokenURL names the endpoint
// in the error of a caller that gave up waiting.
func (h *heldToken) get(ctx context.Context, tokenURL string, fetch func() (string, time.Time, error)) (string, error) {
	h.once.Do(func() { h.turn = make(chan struct{}, 1) })
	select {
	case h.turn <- struct{}{}:
	case <-ctx.Done():
		return "", fmt.Errorf("token endpoint %s: waiting for the token request under way: %w", tokenURL, ctx.Err())
	}
	defer func() { <-h.turn }()
	if h.token != "" && time.Now().Before(h.renewAt) {
		return h.token, nil
	}
	token, renewAt, err := fetch()
	if err != nil {
		return "", err
	}
	h.token, h.renewAt = token, renewAt
	return token, nil
}
