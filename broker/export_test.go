package broker

// SNSWrap is snsWrap for the external tests.
var SNSWrap = snsWrap
