package broker

// The BROKER_LOGGER config resource (kafka-configs --entity-type
// broker-loggers --entity-name <id>): a broker's log level, read with
// DescribeConfigs and changed at run time with IncrementalAlterConfigs,
// handled by the broker itself and not persisted, as in Kafka.
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

// checkBrokerLoggerResource reports the error code and message for a
// BROKER_LOGGER resource that names no broker or another one.
func (b *Broker) checkBrokerLoggerResource(name string) (int16, string) {
	if name == "" {
		return kerr.InvalidRequest.Code, "Broker id must not be empty"
	}
	if id, err := strconv.ParseInt(name, 10, 32); err != nil || int32(id) != b.nodeID {
		return kerr.InvalidRequest.Code, fmt.Sprintf("Unexpected broker id, expected %d but received %s", b.nodeID, name)
	}
	return 0, ""
}

func (b *Broker) describeBrokerLoggers(rr *kmsg.DescribeConfigsResponseResource, want func(string) bool) {
	if code, msg := b.checkBrokerLoggerResource(rr.ResourceName); code != 0 {
		rr.ErrorCode, rr.ErrorMessage = code, kmsg.StringPtr(msg)
		return
	}
	if !want(rootLogger) {
		return
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value = rootLogger, kmsg.StringPtr(log4jLevelName(b.log.GetLevel()))
	c.Source = kmsg.ConfigSourceDynamicBrokerLoggerConfig
	rr.Configs = append(rr.Configs, c)
}

// alterBrokerLoggers validates every change of r first and applies them
// only if all are valid and validateOnly is false.
func (b *Broker) alterBrokerLoggers(r kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool) kmsg.IncrementalAlterConfigsResponseResource {
	rr := kmsg.NewIncrementalAlterConfigsResponseResource()
	rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
	fail := func(code int16, msg string) kmsg.IncrementalAlterConfigsResponseResource {
		rr.ErrorCode, rr.ErrorMessage = code, kmsg.StringPtr(msg)
		return rr
	}
	if code, msg := b.checkBrokerLoggerResource(r.ResourceName); code != 0 {
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
			b.log.Info("log level changed through IncrementalAlterConfigs", "logger", rootLogger, "level", log4jLevelName(level))
		}
		if level <= b.log.GetLevel() {
			b.log.SetLevel(level)
			note()
		} else {
			note()
			b.log.SetLevel(level)
		}
	}
	return rr
}
