package files

import (
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// log is the logger of this file system's messages.
func (fs *FS) log() *logrus.Entry { return logrus.WithField("backing", fs.rootPath) }

func timeOf(ts unix.Timespec) time.Time { return time.Unix(ts.Unix()) }
