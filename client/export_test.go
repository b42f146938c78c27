package client

// FailProduce is failProduce, for the external tests (package client_test).
var FailProduce = failProduce
