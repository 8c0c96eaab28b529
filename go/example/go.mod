module example.com/prebind-go-example

go 1.19

require github.com/prebind/prebind/go v0.0.0

// The package from this checkout; elsewhere drop this line and let
// `go get github.com/prebind/prebind/go` fetch it.
replace github.com/prebind/prebind/go => ../
