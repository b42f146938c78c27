package broker

// The BROKER_LOGGER config resource (kafka-configs --entity-type
// broker-loggers --entity-name <id>): a node's log level, read with
// DescribeConfigs and changed at run time with IncrementalAlterConfigs,
// handled by the node itself and not persisted, as in Kafka: by a broker,
// and by a controller on its own listener (kafka-configs.sh
// --bootstrap-controller, KIP-919).
//
// Keel's subsystems log through one hclog tree with one shared level, so
// the resource has one logger, "root" (Kafka's name for the root log4j
// logger). Its value is a log4j level: TRACE and ALL set hclog's Trace,
// FATAL its Error, OFF its Off. As in Kafka's ConfigAdminManager:
//   - the resource name must be this broker's id (INVALID_REQUEST);
//   - SET takes one of OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL
//     (INVALID_CONFIG otherwise); DELETE of root is refused, "Removing the
//     log level of the root logger is not allowed" (INVALID_REQUEST);
//     APPEND and SUBTRACT are INVALID_REQUEST;
//   - another logger name does not exist (INVALID_CONFIG);
//   - DescribeConfigs lists root with source DYNAMIC_BROKER_LOGGER_CONFIG.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rootLogger is the one logger name a BROKER_LOGGER resource has.
const rootLogger = "root"

// log4jLevels maps Kafka's log level names to hclog's.
var log4jLevels = map[string]hclog.Level{
	"OFF": hclog.Off, "FATAL": hclog.Error, "ERROR": hclog.Error, "WARN": hclog.Warn,
	"INFO": hclog.Info, "DEBUG": hclog.Debug, "TRACE": hclog.Trace, "ALL": hclog.Trace,
}

// log4jLevelName is the level a DescribeConfigs of the root logger reports.
func log4jLevelName(l hclog.Level) string {
	switch l {
	case hclog.Trace:
		return "TRACE"
	case hclog.Debug:
		return "DEBUG"
	case hclog.Warn:
		return "WARN"
	case hclog.Error:
		return "ERROR"
	case hclog.Off:
		return "OFF"
	}
	return "INFO"
}

// nodeLoggers is a node's BROKER_LOGGER resource: its id and its logger,
// whose level the whole hclog tree shares.
type nodeLoggers struct {
	nodeID int32
	log    hclog.Logger
}

// check reports the error code and message for a BROKER_LOGGER resource
// that names no node or another one.
func (n nodeLoggers) check(name string) (int16, string) {
	if name == "" {
		return kerr.InvalidRequest.Code, "Broker id must not be empty"
	}
	if id, err := strconv.ParseInt(name, 10, 32); err != nil || int32(id) != n.nodeID {
		return kerr.InvalidRequest.Code, fmt.Sprintf("Unexpected broker id, expected %d but received %s", n.nodeID, name)
	}
	return 0, ""
}

func (n nodeLoggers) describe(rr *kmsg.DescribeConfigsResponseResource, want func(string) bool) {
	if code, msg := n.check(rr.ResourceName); code != 0 {
		rr.ErrorCode, rr.ErrorMessage = code, kmsg.StringPtr(msg)
		return
	}
	if !want(rootLogger) {
		return
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value = rootLogger, kmsg.StringPtr(log4jLevelName(n.log.GetLevel()))
	c.Source = kmsg.ConfigSourceDynamicBrokerLoggerConfig
	rr.Configs = append(rr.Configs, c)
}

// alter validates every change of r first and applies them only if all
// are valid and validateOnly is false.
func (n nodeLoggers) alter(r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) kmsg.IncrementalAlterConfigsResponseResource {
	rr := kmsg.NewIncrementalAlterConfigsResponseResource()
	rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
	fail := func(code int16, msg string) kmsg.IncrementalAlterConfigsResponseResource {
		rr.ErrorCode, rr.ErrorMessage = code, kmsg.StringPtr(msg)
		return rr
	}
	if code, msg := n.check(r.ResourceName); code != 0 {
		return fail(code, msg)
	}
	level, set := hclog.NoLevel, false
	for _, c := range r.Configs {
		if c.Name != rootLogger {
			return fail(kerr.InvalidConfig.Code, fmt.Sprintf("Logger %s does not exist: Keel has one logger, %s", c.Name, rootLogger))
		}
		switch c.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			v := ""
			if c.Value != nil {
				v = strings.ToUpper(strings.TrimSpace(*c.Value))
			}
			l, ok := log4jLevels[v]
			if !ok {
				return fail(kerr.InvalidConfig.Code, fmt.Sprintf("Cannot set the log level of %s to %q as it is not a supported log level. Valid log levels are OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL", c.Name, v))
			}
			level, set = l, true
		case kmsg.IncrementalAlterConfigOpDelete:
			return fail(kerr.InvalidRequest.Code, "Removing the log level of the root logger is not allowed")
		default:
			return fail(kerr.InvalidRequest.Code, fmt.Sprintf("%s operation is not allowed for the BROKER_LOGGER resource", c.Op))
		}
	}
	if set && !validateOnly {
		// Logged at the more verbose of the two levels, so the line shows.
		note := func() {
			n.log.Info("log level changed through IncrementalAlterConfigs", "logger", rootLogger, "level", log4jLevelName(level))
		}
		if level <= n.log.GetLevel() {
			n.log.SetLevel(level)
			note()
		} else {
			note()
			n.log.SetLevel(level)
		}
	}
	return rr
}

// loggers is this broker's BROKER_LOGGER resource.
func (b *Broker) loggers() nodeLoggers { return nodeLoggers{nodeID: b.nodeID, log: b.log} }
