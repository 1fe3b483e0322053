package files

import (
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

func (fs *FS) logf(format string, args ...any) {
	logrus.WithField("backing", fs.rootPath).Errorf(format, args...)
}

func timeOf(ts unix.Timespec) time.Time { return time.Unix(ts.Unix()) }
