package lanceenc

func decode20(p Page) (*Values, error) {
	return nil, unsupported("2.0 ArrayEncoding")
}

func encodePage20(v *Values) (Page, error) {
	return Page{}, unsupported("2.0 ArrayEncoding")
}
