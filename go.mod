module github.com/sdpshim/sdpshim

go 1.26.0

toolchain go1.26.8

require golang.org/x/sys v0.49.0

require github.com/sirupsen/logrus v1.10.2

require (
	github.com/cilium/ebpf v0.22.0
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/pandatix/go-abnf v0.5.3 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.73.1
	google.golang.org/protobuf v1.36.12 // indirect
)

tool github.com/cilium/ebpf/cmd/bpf2go
