package storage

import (
	"errors"
	"testing"
	"time"

	"github.com/keelstream/keel/network/record"
)

func TestTxnVerificationGuards(t *testing.T) {
	now := time.UnixMilli(testEpochMs)
	l := openTestLog(t, partitionDir(t), OpenOptions{Now: func() time.Time { return now }})
	appendTxn := func(pid int64, epoch int16, seq int32, guard *TxnVerificationGuard) error {
		t.Helper()
		_, err := l.AppendAsLeader(txnBatch(t, pid, epoch, seq, 2), AppendOptions{VerifyTxn: true, TxnGuard: guard})
		return err
	}
	wantRefused := func(err error) {
		t.Helper()
		if !errors.Is(err, ErrInvalidTxnState) || ErrorCode(err) != 48 {
			t.Fatalf("append: got %v, want INVALID_TXN_STATE", err)
		}
	}

	// A transaction's first batch needs a guard, and only its own.
	wantRefused(appendTxn(7, 0, 0, nil))
	other := l.StartTxnVerification(8, 0, false)
	wantRefused(appendTxn(7, 0, 0, other))
	g := l.StartTxnVerification(7, 0, false)
	if g == nil || l.StartTxnVerification(7, 0, false) != g {
		t.Fatal("a verification in flight must share its guard")
	}
	if err := appendTxn(7, 0, 0, g); err != nil {
		t.Fatalf("verified append: %v", err)
	}
	// Inside the open transaction no verification is needed.
	if l.StartTxnVerification(7, 0, false) != nil {
		t.Fatal("an open transaction needs no verification")
	}
	if err := appendTxn(7, 0, 2, nil); err != nil {
		t.Fatalf("append inside the open transaction: %v", err)
	}
	// The append consumed the guard: a second verification starts anew.
	appendMarkerOK(t, l, record.ControlCommit, 7, 0, 0)
	g2 := l.StartTxnVerification(7, 0, false)
	if g2 == nil || g2 == g {
		t.Fatal("after the commit the next transaction needs a new verification")
	}

	// KAFKA-14884's race: the coordinator confirmed the partition, then
	// the transaction's abort marker landed before the append.
	appendMarkerOK(t, l, record.ControlAbort, 7, 0, 0)
	wantRefused(appendTxn(7, 0, 4, g2))
	l.SetHighWatermark(l.LogEndOffset())
	if lso, end := l.LastStableOffset(), l.LogEndOffset(); lso != end {
		t.Fatalf("a refused batch left a transaction open: LSO %d, log end %d", lso, end)
	}

	// A producer's new epoch needs its own verification.
	g3 := l.StartTxnVerification(7, 1, false)
	wantRefused(appendTxn(7, 1, 0, other))
	if err := appendTxn(7, 1, 0, g3); err != nil {
		t.Fatalf("verified append of the new epoch: %v", err)
	}

	// Without VerifyTxn (the setting off) nothing is checked.
	if _, err := l.AppendAsLeader(txnBatch(t, 9, 0, 0, 1), AppendOptions{}); err != nil {
		t.Fatalf("unverified append with verification off: %v", err)
	}
	// The group coordinator's transactional offset commits (each at
	// sequence 0) are verified as a producer's batches are.
	coordAppend := func(guard *TxnVerificationGuard) error {
		_, err := l.AppendAsLeader(txnBatch(t, 10, 0, 0, 1), AppendOptions{FromCoordinator: true, VerifyTxn: true, TxnGuard: guard})
		return err
	}
	wantRefused(coordAppend(nil))
	if err := coordAppend(l.StartTxnVerification(10, 0, false)); err != nil {
		t.Fatalf("verified coordinator append: %v", err)
	}
	if err := coordAppend(nil); err != nil {
		t.Fatalf("the coordinator's second append in the open transaction: %v", err)
	}

	// A verification that never led to an append expires with the idle
	// producers.
	if l.StartTxnVerification(8, 0, false) != other {
		t.Fatal("producer 8's verification should still be in flight")
	}
	now = now.Add(2 * time.Hour)
	l.RemoveExpiredProducers(now, time.Hour)
	if l.StartTxnVerification(8, 0, false) == other {
		t.Fatal("an expired verification's guard was kept")
	}
}

// TestTxnVerificationGuardsTV2: under transaction version 2 the previous
// transaction's marker carries the epoch the next transaction runs at, and
// may land while the leader asks the coordinator to add the partition to
// that next transaction: it must not cost the add its guard. A marker of a
// later epoch (the next transaction fenced and aborted) still does.
func TestTxnVerificationGuardsTV2(t *testing.T) {
	l := openTestLog(t, partitionDir(t), OpenOptions{})
	appendTxn := func(epoch int16, seq int32, guard *TxnVerificationGuard) error {
		t.Helper()
		_, err := l.AppendAsLeader(txnBatch(t, 7, epoch, seq, 1), AppendOptions{VerifyTxn: true, TxnGuard: guard})
		return err
	}
	if err := appendTxn(0, 0, l.StartTxnVerification(7, 0, true)); err != nil {
		t.Fatal(err)
	}
	// The next transaction (epoch 1) starts its add; the commit marker of
	// the first, at epoch 1, lands meanwhile.
	g := l.StartTxnVerification(7, 1, true)
	if g == nil {
		t.Fatal("a transaction of a new epoch needs its add")
	}
	appendMarkerOK(t, l, record.ControlCommit, 7, 1, 0)
	if err := appendTxn(1, 0, g); err != nil {
		t.Fatalf("the added batch after the previous transaction's marker: %v", err)
	}
	// The same for a transaction version 1 guard refuses the batch
	// (KAFKA-14884: the marker may end the very transaction verified).
	appendMarkerOK(t, l, record.ControlCommit, 7, 2, 0)
	g = l.StartTxnVerification(7, 2, false)
	appendMarkerOK(t, l, record.ControlAbort, 7, 2, 0)
	if err := appendTxn(2, 0, g); !errors.Is(err, ErrInvalidTxnState) {
		t.Fatalf("a version 1 verification after a marker of its epoch: %v, want INVALID_TXN_STATE", err)
	}
	// A marker past the add's epoch (its transaction fenced) drops it.
	g = l.StartTxnVerification(7, 3, true)
	appendMarkerOK(t, l, record.ControlAbort, 7, 5, 0)
	if err := appendTxn(3, 0, g); err == nil {
		t.Fatal("a batch whose transaction was fenced and aborted was appended")
	}
	l.SetHighWatermark(l.LogEndOffset())
	if lso, end := l.LastStableOffset(), l.LogEndOffset(); lso != end {
		t.Fatalf("a transaction is open: LSO %d, log end %d", lso, end)
	}
}
