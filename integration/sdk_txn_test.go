package integration

import (
	"testing"
	"time"

	"github.com/keelstream/keel/client/clienttest"
)

// sdkTxnOverrides keep a one-node cluster's internal topics at RF 1 and its
// group rebalances fast.
var sdkTxnOverrides = []string{
	"transaction.state.log.replication.factor=1",
	"transaction.state.log.min.isr=1",
	"transaction.state.log.num.partitions=4",
	"offsets.topic.replication.factor=1",
	"offsets.topic.num.partitions=4",
	"group.initial.rebalance.delay.ms=50",
	"group.min.session.timeout.ms=500",
}

// TestSDKTransactionsAgainstKeel runs the SDK transactional producer's
// suite (client/producer_txn_test.go runs it against franz-go's kfake)
// against a real Keel node: commit, abort, commit under read_committed;
// consumer group offsets committed with the transaction only; fencing by a
// second producer with the same transactional id; produce outside a
// transaction refused; Close aborting an open transaction.
func TestSDKTransactionsAgainstKeel(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, sdkTxnOverrides...)
	c.WaitReady(30 * time.Second)
	clienttest.RunTransactions(t, clienttest.Target{Bootstrap: c.BootstrapServers()})
}

// TestSDKTransactionsAgainstKeelCluster runs the commit/abort/commit and
// fencing scenarios against three nodes, where the transaction
// coordinator, the group coordinator and the partition leaders are
// usually different brokers.
func TestSDKTransactionsAgainstKeelCluster(t *testing.T) {
	c := StartCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}, {ID: 3, Roles: "broker"}},
		"group.initial.rebalance.delay.ms=50", "group.min.session.timeout.ms=500")
	c.WaitReady(30 * time.Second)
	tgt := clienttest.Target{Bootstrap: c.BootstrapServers()}
	t.Run("CommitAbortCommit", func(t *testing.T) { clienttest.TxnCommitAbortCommit(t, tgt) })
	t.Run("OffsetsCommitOnlyWithTheTransaction", func(t *testing.T) { clienttest.TxnOffsetsCommitOnlyWithTheTransaction(t, tgt) })
	t.Run("SecondProducerFencesTheFirst", func(t *testing.T) { clienttest.TxnSecondProducerFencesTheFirst(t, tgt) })
}

// BenchmarkSDKTransactions measures the SDK's committed transactions per
// second (10 records each) against one Keel node.
func BenchmarkSDKTransactions(b *testing.B) {
	c := StartCluster(b, []NodeSpec{{ID: 1, Roles: "broker,controller"}}, sdkTxnOverrides...)
	c.WaitReady(30 * time.Second)
	clienttest.BenchmarkTransactions(b, clienttest.Target{Bootstrap: c.BootstrapServers()})
}
