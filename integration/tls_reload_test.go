package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A broker's SSL keystore replaced at runtime, as Kafka operators rotate
// certificates (KIP-226): kafka-configs --entity-type brokers
// --entity-name 1 --alter --add-config
// listener.name.ssl.ssl.keystore.location=..., through kadm against the
// real binary. The broker named serves the new certificate to new
// connections, the other keeps its own; setting the same path again
// reloads a file replaced in place; a certificate for another subject,
// a cluster-wide setting and an unprefixed one are refused and change
// nothing; the password is never described; a restart keeps the dynamic
// keystore; clients with mutual TLS work throughout.
func TestSSLKeystoreUpdate(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}},
		ProcessOptions{SSL: certs.brokerSSL()})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tlsCfg := &tls.Config{RootCAs: certs.pool, Certificates: []tls.Certificate{certs.client}}
	served := func(id int32) *big.Int {
		t.Helper()
		conn, err := tls.Dial("tcp", c.Node(id).SSLAddr(), tlsCfg)
		if err != nil {
			t.Fatalf("TLS to broker %d: %v", id, err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	original := served(1)
	if served(2).Cmp(original) != 0 {
		t.Fatal("both brokers start with the keystore of server.properties")
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).SSLAddr()), kgo.DialTLSConfig(tlsCfg))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const prefix = "listener.name.ssl."
	set := func(path string, brokers ...int32) error {
		t.Helper()
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Name: prefix + "ssl.keystore.location", Value: kadm.StringPtr(path)},
			{Name: prefix + "ssl.keystore.password", Value: kadm.StringPtr("broker-secret")},
			{Name: prefix + "ssl.key.password", Value: kadm.StringPtr("broker-secret")},
		}, brokers...)
		if err != nil {
			t.Fatalf("alter broker configs: %v", err)
		}
		for _, r := range resps {
			if r.Err != nil {
				return &alterError{r.Err, r.ErrMessage}
			}
		}
		return nil
	}

	setOne := func(name, value string) error {
		t.Helper()
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: name, Value: kadm.StringPtr(value)}}, 1)
		if err != nil {
			t.Fatalf("alter broker 1's %s: %v", name, err)
		}
		if resps[0].Err != nil {
			return &alterError{resps[0].Err, resps[0].ErrMessage}
		}
		return nil
	}

	// A new certificate for the same subject: broker 1 serves it.
	newPath, newCert := certs.brokerKeystore(t, "broker-2027.p12", "broker")
	if err := set(newPath, 1); err != nil {
		t.Fatalf("rotate broker 1's keystore: %v", err)
	}
	if got := served(1); got.Cmp(newCert.SerialNumber) != 0 {
		t.Fatalf("broker 1 serves serial %v after the update, want the new %v", got, newCert.SerialNumber)
	}
	if served(2).Cmp(original) != 0 {
		t.Fatal("broker 2 changed its certificate: the update was broker 1's")
	}

	// Refused, and nothing changes.
	otherPath, _ := certs.brokerKeystore(t, "impostor.p12", "impostor")
	for _, r := range []struct {
		what string
		err  error
		code error
		msg  string
	}{
		{"another subject", set(otherPath, 1), kerr.InvalidConfig, "DistinguishedName does not match"},
		{"a cluster-wide keystore", set(newPath), kerr.InvalidConfig, "broker id must be specified"},
		{"broker 2's keystore sent to broker 1", alterOtherVia1(ctx, t, cl, newPath), kerr.InvalidRequest, "validated by that broker"},
		{"a keystore for the PLAINTEXT listener", setOne("listener.name.plaintext.ssl.keystore.location", newPath), kerr.InvalidConfig, "does not use SSL"},
		{"a keystore without the listener prefix", setOne("ssl.keystore.location", newPath), kerr.InvalidConfig, "listener prefix"},
	} {
		var ae *alterError
		if !errors.As(r.err, &ae) || ae.err != r.code || !strings.Contains(ae.msg, r.msg) {
			t.Errorf("%s: %v, want %v with %q", r.what, r.err, r.code, r.msg)
		}
	}
	if got := served(1); got.Cmp(newCert.SerialNumber) != 0 {
		t.Fatalf("a refused update changed broker 1's certificate to serial %v", got)
	}
	// Broker 1 passes on another broker's configs that touch no keystore,
	// with its own dynamic keystore set (AlterConfigs, which replaces a
	// resource's configs, sent to broker 1 for broker 2).
	legacy := kmsg.NewPtrAlterConfigsRequest()
	res := kmsg.NewAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	res.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "log.cleaner.threads", Value: kmsg.StringPtr("2")}}
	legacy.Resources = append(legacy.Resources, res)
	if resp, err := legacy.RequestWith(ctx, cl.Broker(1)); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("AlterConfigs for broker 2 through broker 1: %v %+v", err, resp)
	}

	// The file replaced in place, the same path set again (with keel
	// configs, kafka-configs.sh's form): reloaded.
	_, inPlace := certs.brokerKeystore(t, "broker-2027.p12", "broker")
	out := c.Keel(t, ctx, "configs", "--alter", "--bootstrap-server", c.BootstrapServers()[0], "--entity-type", "brokers", "--entity-name", "1",
		"--add-config", prefix+"ssl.keystore.location="+newPath+","+prefix+"ssl.keystore.password=broker-secret,"+prefix+"ssl.key.password=broker-secret")
	if !strings.Contains(out, "Completed updating config for broker 1.") {
		t.Fatalf("keel configs --alter printed %q", out)
	}
	if got := served(1); got.Cmp(inPlace.SerialNumber) != 0 {
		t.Fatalf("broker 1 serves serial %v after its keystore file was replaced and set again, want %v", got, inPlace.SerialNumber)
	}

	// DescribeConfigs: dynamic, the passwords hidden.
	described, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range described {
		for _, cfg := range rc.Configs {
			switch cfg.Key {
			case prefix + "ssl.keystore.location":
				if cfg.Source != 2 || cfg.Value == nil || *cfg.Value != newPath {
					t.Errorf("%s described as %v from source %v, want the dynamic broker config %s", cfg.Key, cfg.Value, cfg.Source, newPath)
				}
			case prefix + "ssl.keystore.password", prefix + "ssl.key.password":
				if !cfg.Sensitive || cfg.Value != nil {
					t.Errorf("%s described with value %v, sensitive %v", cfg.Key, cfg.Value, cfg.Sensitive)
				}
			}
		}
	}
	if strings.Contains(c.Log(1), "broker-secret") {
		t.Error("broker 1's log shows the keystore password")
	}

	// A restart applies the dynamic keystore again; clients get through.
	c.Restart(1)
	c.WaitReady(1)
	if got := served(1); got.Cmp(inPlace.SerialNumber) != 0 {
		t.Fatalf("after a restart broker 1 serves serial %v, want the dynamic keystore's %v", got, inPlace.SerialNumber)
	}
	const topic = "rotated"
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).SSLAddr(), c.Node(2).SSLAddr()), kgo.DialTLSConfig(tlsCfg),
		kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if resp, err := kadm.NewClient(prod).CreateTopic(ctx, 2, 2, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	for i := range 100 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce over TLS after the rotation: %v", err)
		}
	}
}

// alterError is a refused alter-configs resource.
type alterError struct {
	err error
	msg string
}

func (e *alterError) Error() string { return e.err.Error() + ": " + e.msg }

// alterOtherVia1 sends broker 2's keystore setting to broker 1 (kadm
// would route it to broker 2): a raw IncrementalAlterConfigs request.
func alterOtherVia1(ctx context.Context, t *testing.T, cl *kgo.Client, path string) error {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "2"
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = "listener.name.ssl.ssl.keystore.location", kmsg.StringPtr(path)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Resources[0]
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		return &alterError{err, msg}
	}
	return nil
}

// The inter-broker listener's keystore rotated on one broker while an
// acks=all workload runs: a certificate from the same CA is taken, and
// after the other broker restarts (every connection between them made
// anew, each side presenting and checking the rotated certificate)
// replication carries on with no acknowledged record lost. One from a CA
// the other nodes do not trust is refused before it could cut the broker
// off.
func TestSSLKeystoreUpdateBetweenNodes(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "broker,controller"}, {ID: 2, Roles: "broker"}},
		ProcessOptions{SSL: certs.brokerSSL(), InternalSSL: true, Overrides: []string{"replica.lag.time.max.ms=3000"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const topic, partitions = "rotated-between-nodes", 2
	if resp, err := adm.CreateTopic(ctx, partitions, 2, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create topic: %v %v", err, resp.Err)
	}
	w := StartWorkload(t, c.BootstrapServers(), topic, 2, 200)
	defer w.Stop()
	w.WaitEachPartition(partitions, 50, 30*time.Second, "before the rotation")

	rotate := func(path string) (msg string, err error) {
		t.Helper()
		resps, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{
			{Name: "listener.name.internal.ssl.keystore.location", Value: kadm.StringPtr(path)},
			{Name: "listener.name.internal.ssl.keystore.password", Value: kadm.StringPtr("broker-secret")},
		}, 2)
		if err != nil {
			t.Fatalf("alter broker 2's configs: %v", err)
		}
		return resps[0].ErrMessage, resps[0].Err
	}
	foreign, _ := newTestCerts(t).brokerKeystore(t, "foreign.p12", "broker")
	if msg, err := rotate(foreign); err != kerr.InvalidConfig || !strings.Contains(msg, "not trusted by the current truststore") {
		t.Fatalf("a certificate from another CA on the inter-broker listener: %v %q", err, msg)
	}
	path, cert := certs.brokerKeystore(t, "broker2-internal.p12", "broker")
	if msg, err := rotate(path); err != nil {
		t.Fatalf("rotate broker 2's inter-broker keystore: %v %s", err, msg)
	}
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.Node(2).InternalPort),
		&tls.Config{RootCAs: certs.pool, Certificates: []tls.Certificate{certs.client}})
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.ConnectionState().PeerCertificates[0].SerialNumber; got.Cmp(cert.SerialNumber) != 0 {
		t.Errorf("broker 2's inter-broker listener serves serial %v, want the rotated %v", got, cert.SerialNumber)
	}
	conn.Close()

	c.Restart(1)
	c.WaitReady(1)
	waitFor(t, 60*time.Second, "both replicas back in every ISR", func() bool {
		topics, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return false
		}
		for _, p := range topics[topic].Partitions {
			if len(p.ISR) != 2 {
				return false
			}
		}
		return true
	})
	w.WaitAcked(300, 30*time.Second, "after the rotation and a restart")
	w.Stop()
	if got := w.Check(60 * time.Second); got == 0 {
		t.Fatal("no acknowledged record checked")
	}
}

// A controller-only node's controller listener keystore rotated through a
// broker with keel configs: the controller takes it from the metadata
// log, serves it to new connections and again after a restart, and the
// broker, restarted to connect anew, registers and serves.
func TestSSLKeystoreUpdateOnAController(t *testing.T) {
	certs := newTestCerts(t)
	c := StartProcessCluster(t, []NodeSpec{{ID: 1, Roles: "controller"}, {ID: 2, Roles: "broker"}},
		ProcessOptions{SSL: certs.brokerSSL(), InternalSSL: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	servedByController := func() *big.Int {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", c.Node(1).ControllerPort),
			&tls.Config{RootCAs: certs.pool, Certificates: []tls.Certificate{certs.client}})
		if err != nil {
			return nil
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber
	}
	path, cert := certs.brokerKeystore(t, "controller-2027.p12", "broker")
	const prefix = "listener.name.controller.ssl."
	c.Keel(t, ctx, "configs", "alter", "--bootstrap-server", c.BootstrapServers()[0], "--entity-type", "brokers", "--entity-name", "1",
		"--add-config", prefix+"keystore.location="+path+","+prefix+"keystore.password=broker-secret,"+prefix+"key.password=broker-secret")
	waitFor(t, 30*time.Second, "the controller serving the rotated certificate", func() bool {
		got := servedByController()
		return got != nil && got.Cmp(cert.SerialNumber) == 0
	})

	c.Restart(1)
	waitFor(t, 30*time.Second, "the restarted controller serving the rotated certificate", func() bool {
		got := servedByController()
		return got != nil && got.Cmp(cert.SerialNumber) == 0
	})
	c.Restart(2)
	c.WaitReady(2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapServers()...), kgo.DefaultProduceTopic("after-rotation"),
		kgo.AllowAutoTopicCreation(), kgo.RetryTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce after the controller's rotation: %v", err)
	}
}
