// kube-apiserver for moco-rs's tests: the upstream command from k8s.io/kubernetes, linked
// in the wrapper module that scripts/kube/build.sh generates.
package main

import (
	"os"
	_ "time/tzdata" // CronJob time zones are validated against the embedded database

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the build-info metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
