package cluster

import (
	"github.com/sirupsen/logrus"
	"go.uber.org/zap"
)

// quietLogger is the etcd client's logger: errors only (it logs every
// retry of a member that is down at warn level).
func quietLogger() *zap.Logger {
	c := zap.NewProductionConfig()
	c.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	l, err := c.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}

// logSlow logs a failure of the cluster that does not fail the caller.
func logSlow(format string, args ...any) { logrus.Warnf("cluster: "+format, args...) }

// embedLogLevel is the embedded etcd member's log level.
var embedLogLevel = "error"
