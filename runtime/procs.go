package runtime

import goruntime "runtime"

func gomaxprocs() int { return goruntime.GOMAXPROCS(0) }
