// Command pause is the devnode's sandbox image entrypoint: it holds a Pod's namespaces open and
// does nothing until it is told to stop (SIGTERM or SIGINT), like Kubernetes' own pause. It is
// built here so that nothing is pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
