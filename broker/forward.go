package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/keelstream/keel/network"
)

// defaultForwardTimeout bounds a forwarded request that carries no timeout
// of its own (AlterConfigs, IncrementalAlterConfigs) or a non-positive one.
const defaultForwardTimeout = 30 * time.Second

// forward sends a metadata-changing request to the active controller on a
// goroutine the Broker owns and completes the returned Deferred with the
// controller's response, once the records are committed and this broker's
// ApplyMetadata has published them (whatever order the node runs its
// subscribers in). On a transport error every entry of the request answers
// errorResponse's code: REQUEST_TIMED_OUT when timeout passed,
// NOT_CONTROLLER otherwise (the client refreshes its metadata and retries,
// as with Kafka's forwarding). ctx is the connection's: a closed
// connection cancels the forward.
//
// Concurrency: any goroutine; never blocks.
func (b *Broker) forward(ctx context.Context, req kmsg.Request, timeout time.Duration, errorResponse func(code int16, msg string) kmsg.Response) network.Result {
	return b.forwardThen(ctx, req, timeout, errorResponse, nil)
}

// forwardThen is forward with then, if not nil, applied to the response
// (the controller's or errorResponse's) before it goes to the client: a
// handler that answered part of a request itself adds its part.
func (b *Broker) forwardThen(ctx context.Context, req kmsg.Request, timeout time.Duration, errorResponse func(code int16, msg string) kmsg.Response, then func(kmsg.Response) kmsg.Response) network.Result {
	if then == nil {
		then = func(r kmsg.Response) kmsg.Response { return r }
	}
	if timeout <= 0 {
		timeout = defaultForwardTimeout
	}
	d := network.NewDeferred()
	started := b.spawn(func() {
		fctx, cancel := context.WithTimeout(b.ctx, timeout)
		defer cancel()
		stop := context.AfterFunc(ctx, cancel)
		defer stop()
		resp, err := b.ctrl.Forward(fctx, req)
		if err == nil {
			// The node's image has the records now; answer once this
			// broker has applied them too (its logs created or deleted),
			// so the client's next request here sees the change.
			if werr := b.waitApplied(fctx, b.meta.Image().Offset()); werr != nil && ctx.Err() == nil {
				b.log.Warn("forwarded request answered before the broker applied its metadata", "api", kmsg.NameForKey(req.Key()), "error", werr)
			}
		}
		switch {
		case err == nil && resp != nil && resp.Key() == req.Key():
			d.Complete(&network.Response{Msg: then(resp)})
		case ctx.Err() != nil:
			d.Complete(nil) // the connection is gone
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(fctx.Err(), context.DeadlineExceeded):
			d.Complete(&network.Response{Msg: then(errorResponse(kerr.RequestTimedOut.Code, "the controller did not answer in time"))})
		default:
			if err == nil {
				err = errors.New("controller answered with the wrong response type")
			}
			b.log.Warn("forwarding to the controller failed", "api", kmsg.NameForKey(req.Key()), "error", err)
			d.Complete(&network.Response{Msg: then(errorResponse(kerr.NotController.Code, err.Error()))})
		}
	})
	if !started {
		return &network.Response{Msg: then(errorResponse(kerr.NotController.Code, "broker shutting down"))}
	}
	return d
}

// millis converts a request's timeout field.
func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }
